package mcpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/binding"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/execution"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/programs"
	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

// Saved programs as MCP tools (docs/design.md §23): what a program is and who saves it is
// package programs'; here is only how an agent's session offers them (`<prefix>__<name>`, in
// line with the ledger at each turn) and how a call of one runs: as run_code would run its
// text, then main, under the agent's terms, policy, budgets and approvals.

// Programs is how an agent is offered its tenant's saved programs: under Prefix (""
// means programs.DefaultPrefix), and, with Propose, the save_program built-in through which the
// model proposes saving one, which a person must accept (proposeProgram).
type Programs struct {
	Prefix  string
	Propose bool
}

func (p Programs) prefix() string { return programs.Prefix(p.Prefix) }

// programRoutes serves the operator's /v1/programs over store (programs.Route).
func (h *httpHandler) programRoutes(mux *http.ServeMux, store budget.Programs) {
	rt := programs.Route{Store: store, Log: h.opts.Logger}
	mux.Handle("GET /v1/programs", h.operatorOnly(64<<10, rt.List))
	mux.Handle("GET /v1/programs/{name}", h.operatorOnly(64<<10, rt.Show))
	mux.Handle("PUT /v1/programs/{name}", h.operatorOnly(programs.MaxBodyBytes, rt.Put))
	mux.Handle("DELETE /v1/programs/{name}", h.operatorOnly(64<<10, rt.Delete))
}

// syncPrograms adds, replaces and removes the saved programs offered as tools so that they are
// exactly the agent's (programs.Offered), each annotated by the tools it can reach in t. An
// agent without code execution, or a server without a ledger, offers none. go-sdk sends
// notifications/tools/list_changed for each change.
func (h *handlers) syncPrograms(ctx context.Context, t *upstream.Turn) {
	if h.agent.CodeExecution == nil || h.opts.Ledger == nil {
		return
	}
	offered, err := programs.Offered(ctx, h.opts.Ledger, h.agent.Tenant, h.agent.Name)
	if err != nil {
		h.log.Warn("saved programs not read; their tools stay as they were", "err", err)
		return
	}
	h.savedMu.Lock()
	defer h.savedMu.Unlock()
	h.offered = offered
	prefix := h.agent.Programs.prefix()
	defs := map[string]*mcp.Tool{}
	for _, p := range offered {
		defs[programs.ToolName(prefix, p.Name)] = &mcp.Tool{Name: programs.ToolName(prefix, p.Name), Title: p.Name, InputSchema: p.InputSchema,
			Description: p.Description + "\n(A saved program, version " + p.Version + ".)",
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: h.reachesReadOnly(t, p.Code), OpenWorldHint: ptr(h.agent.CodeExecution.Terms.Network != engine.NetworkNone)}}
	}
	h.setTools(h.saved, defs, func(name string) mcp.ToolHandler {
		program := strings.TrimPrefix(name, prefix+upstream.Separator)
		return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return h.runSaved(ctx, req, program), nil
		}
	})
}

// reach is what a saved program of text code may call in t: the tools it names
// (programs.Reach), or nil for every bound tool.
func reach(t *upstream.Turn, code string) []string {
	if t == nil {
		return []string{}
	}
	var tools [][2]string
	for _, n := range t.Names() {
		alias := ""
		if tool, fe := t.Lookup(n); fe == nil {
			alias = tool.Alias()
		}
		tools = append(tools, [2]string{n, alias})
	}
	return programs.Reach(code, tools)
}

// reachesReadOnly says whether a saved program of text code is read-only: its terms grant no
// network, and every tool it can reach in t is read-only and needs no approval (run_code's
// rule, §14.2, over its own reach).
func (h *handlers) reachesReadOnly(t *upstream.Turn, code string) bool {
	if h.agent.CodeExecution.Terms.Network != engine.NetworkNone {
		return false
	}
	r := reach(t, code)
	if r == nil || t == nil {
		return t == nil || t.ReadOnly()
	}
	if len(t.Problems()) > 0 {
		return false // a server not yet listed may offer anything under a name the program uses
	}
	for _, n := range r {
		tool, fe := t.Lookup(n)
		if fe != nil || !upstream.ReadOnlyTool(tool) || t.NeedsApproval(tool) {
			return false
		}
	}
	return true
}

// runSaved runs one call of the saved program name: its current version, read from the ledger
// (a new version answers from the moment it is saved), with the call's arguments.
func (h *handlers) runSaved(ctx context.Context, req *mcp.CallToolRequest, name string) *mcp.CallToolResult {
	p, err := h.opts.Ledger.SavedProgram(ctx, h.agent.Tenant, name)
	if err != nil {
		return toolError("the saved program %s is no longer available", name)
	}
	code, err := programs.Program(p, req.Params.Arguments)
	if err != nil {
		return toolError("%v", err)
	}
	reached := reach(h.turn(ctx), p.Code)
	return h.serveCall(ctx, req, func(ctx context.Context, env callEnv) *mcp.CallToolResult {
		ctx, end, ok := h.opts.Drain.begin(ctx)
		if !ok {
			return toolError("the server is shutting down; nothing ran")
		}
		res := h.execute(ctx, req, execution.Program{Code: code, Saved: &execution.Saved{Name: p.Name, Version: p.Version}, Reach: reached}, env)
		end()
		return renderResult(res, h.agent.CodeExecution.Budget, h.agent.Version)
	})
}

// nestedPrograms are the saved programs a program of req's may call like bindings
// (binding.Nested): those the session was last offered (syncPrograms). A call runs the
// program's current version as its own execution in the same Run, asked about through the
// same asker; it may call no saved program itself.
type nestedPrograms struct {
	h        *handlers
	req      *mcp.CallToolRequest
	env      callEnv
	names    map[string]string // tool name → program name
	keywords map[string]binding.Keywords
}

// nested returns the saved programs a program run for req may call, nil when there are none.
func (h *handlers) nested(req *mcp.CallToolRequest, env callEnv) binding.Nested {
	h.savedMu.Lock()
	offered := h.offered
	h.savedMu.Unlock()
	if len(offered) == 0 {
		return nil
	}
	n := &nestedPrograms{h: h, req: req, env: env, names: map[string]string{}, keywords: map[string]binding.Keywords{}}
	for _, p := range offered {
		name := programs.ToolName(h.agent.Programs.prefix(), p.Name)
		params, required := programs.Keywords(p)
		n.names[name], n.keywords[name] = p.Name, binding.Keywords{Params: params, Required: required}
	}
	return n
}

func (n *nestedPrograms) Programs() map[string]binding.Keywords { return n.keywords }

// List is what a program's list_tools adds: what the host's would, of the programs it may call.
func (n *nestedPrograms) List(in upstream.ListToolsArgs) any {
	var out []programs.Summary
	for _, s := range n.h.savedSummaries(in) {
		if _, ok := n.keywords[s.Name]; ok {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func (n *nestedPrograms) Describe(tool string) any {
	p, _ := n.h.offeredProgram(tool)
	return programs.Describe(n.h.agent.Programs.prefix(), p)
}

func (n *nestedPrograms) Call(ctx context.Context, tool string, args json.RawMessage) (json.RawMessage, *failure.Error) {
	h := n.h
	p, err := h.opts.Ledger.SavedProgram(ctx, h.agent.Tenant, n.names[tool])
	if err != nil {
		return nil, failure.New(failure.Unavailable, "the saved program %s is no longer available", n.names[tool])
	}
	code, err := programs.Program(p, args)
	if err != nil {
		return nil, failure.New(failure.InvalidArguments, "%v", err)
	}
	asking := h.asking(n.req, n.env.asking.Asker, "") // asked in place: no other process carries a nested call on
	asking.Standing = n.env.asking.Standing
	res := execution.Execute(ctx, h.agent.CodeExecution, execution.Program{Code: code, Run: h.runIn(n.req, n.env), AgentVersion: h.agent.Version,
		Turn: h.turn, Approvals: asking, Saved: &execution.Saved{Name: p.Name, Version: p.Version}, Reach: reach(h.turn(ctx), p.Code)},
		&execution.Options{Ledger: h.opts.Ledger, Blobs: h.opts.Blobs, Logger: h.log, Report: h.report, Render: ModelReads})
	if f := res.Failure; f != nil {
		return nil, failure.New(failure.UpstreamError, "the saved program %s (version %s) failed: %s: %s", p.Name, p.Version, f.Kind, f.Message)
	}
	if len(res.Value) == 0 {
		return json.RawMessage("null"), nil
	}
	return res.Value, nil
}

// offeredProgram is the saved program the session was last offered under tool name, if any.
func (h *handlers) offeredProgram(name string) (budget.SavedProgram, bool) {
	prefix := h.agent.Programs.prefix() + upstream.Separator
	if !strings.HasPrefix(name, prefix) {
		return budget.SavedProgram{}, false
	}
	h.savedMu.Lock()
	defer h.savedMu.Unlock()
	for _, p := range h.offered {
		if p.Name == strings.TrimPrefix(name, prefix) {
			return p, true
		}
	}
	return budget.SavedProgram{}, false
}

// savedInfo is get_tool_info's answer for a saved program: its description, then its stub.
func (h *handlers) savedInfo(p budget.SavedProgram) *mcp.CallToolResult {
	info := programs.Describe(h.agent.Programs.prefix(), p)
	var text strings.Builder
	enc := json.NewEncoder(&text)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(struct {
		programs.Info
		PythonStub string `json:"python_stub,omitempty"` // shadows the embedded one: left out
	}{Info: info})
	text.WriteString("\npython_stub:\n" + info.PythonStub)
	return &mcp.CallToolResult{StructuredContent: info, Content: []mcp.Content{&mcp.TextContent{Text: text.String()}}}
}

// savedSummaries are what list_tools adds of the saved programs offered: on the first page of
// a listing of every server, one line each; with a query, those it matches as it matches tools
// (upstream.Match, best first). A program's list_tools adds the same (nestedPrograms.List).
func (h *handlers) savedSummaries(in upstream.ListToolsArgs) []programs.Summary {
	if in.Cursor != "" || in.Server != "" {
		return nil
	}
	h.savedMu.Lock()
	offered := h.offered
	h.savedMu.Unlock()
	prefix := h.agent.Programs.prefix()
	if strings.TrimSpace(in.Query) != "" {
		docs := make([]upstream.Document, len(offered))
		for i, p := range offered {
			params, _ := programs.Keywords(p)
			docs[i] = upstream.Document{Name: p.Name, Description: p.Description, Params: params}
		}
		var matched []budget.SavedProgram
		for _, i := range upstream.Match(in.Query, docs) {
			matched = append(matched, offered[i])
		}
		offered = matched
	}
	var out []programs.Summary
	for _, p := range offered {
		out = append(out, programs.Summarize(prefix, p))
	}
	return out
}
