package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/approval"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/execution"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

// Tool names offered to the model.
const (
	ToolRunCode        = "run_code"
	ToolListTools      = "list_tools"
	ToolGetToolInfo    = "get_tool_info"
	ToolReadToolOutput = "read_tool_output"
)

// MetaAgentVersion is the _meta key carrying the agent's version hash.
const MetaAgentVersion = "mcp-sandbox/agent_version"

// maxCodeBytes bounds one program handed to run_code.
const maxCodeBytes = 1 << 20

// Agent is what one MCP session is offered: an agent of a tenant.
type Agent struct {
	Tenant, Name string
	// Version identifies the agent's effective definition (configs.AgentVersion).
	Version string
	// CodeExecution nil means run_code is never offered.
	CodeExecution *CodeExec
	// Upstreams nil means the agent has no upstream tools.
	Upstreams *Upstreams
	// ImageInlineBytes is the largest image artifact (PNG, JPEG, GIF, WebP by its first
	// bytes) that comes back in run_code's result as ImageContent beside its handle (the
	// profile's images.inline_bytes); 0 sends none.
	ImageInlineBytes int64
}

// CodeExec is an agent's code execution: where programs run and under which terms. It is
// execution.Spec, the one `mcp-sandbox run` executes too.
type CodeExec = execution.Spec

// UnavailableSandbox is a Sandbox that stands in for a profile which cannot run on this host:
// run_code stays offered and answers every call with the refusal, and its description says
// why, so the model learns it before it writes a program.
type UnavailableSandbox interface {
	engine.Sandbox
	// Unavailable is why nothing can run: a sentence safe to show the model.
	Unavailable() string
}

// Options configure NewServer; nil means defaults.
type Options struct {
	// Name and Version of the implementation reported at initialize.
	Name, Version string
	// Logger receives operational logs; nil means slog.Default().
	Logger *slog.Logger
	// Ledger records Runs, executions and tool calls and meters binding budgets; nil means
	// nothing is recorded or metered (tests, and run's one-shot use without a data dir).
	Ledger budget.Ledger
	// Blobs keeps outputs and large binding results under handles; nil means there is no
	// blob store: outputs are previews only and a result over the per-call ceiling is
	// binding_result_not_paged.
	Blobs outputs.BlobStore
	// Quotas, when set, bounds the executions running at once (and how long one waits for a
	// slot) and, over HTTP, the sessions, per tenant and for the whole server; one Quotas is
	// shared by every agent's server. nil bounds neither.
	Quotas *Quotas
	// Drain, when set, lets the caller's shutdown cancel and wait for executions in flight,
	// and end the server's sessions (Drain.Close). Without one the caller owns the sessions it
	// serves: each session's watcher ends with its session.
	Drain *Drain
	// Metrics receives what the server counts (executions, tool calls, budget refusals,
	// approvals, kept outputs); nil counts nothing.
	Metrics telemetry.Metrics
	// StateKeys seal the requestState of an approval asked through input requests (revision
	// 2026-07-28, mrtr.go); nil means a random key of this server's own, so a retry reaching
	// another process, or this one after a restart, is refused. Share one across agents.
	StateKeys *StateKeys
	// Cassettes, when set, records every execution's cassette (execution.Options.Cassettes).
	Cassettes execution.CassetteKeeper
	// Room keeps the questions of the calls that need a person's approval and takes their
	// answers from every path (package approval); nil means one over Ledger's pauses (or
	// memory, without a Ledger), made with PausePoll and Paused: by NewServer for its own
	// agent, by HTTPHandler once for all of its agents.
	Room *approval.Room
	// PausePoll is how often a call waiting for a person's answer looks in the ledger for what
	// another process did (an operator's answer, a retry there); zero means
	// approval.DefaultPoll.
	PausePoll time.Duration
	// Paused, when set, hears of each question kept as a pause, once, after it is saved
	// (approvals.webhook: approval.Webhook.Notify). It must not block.
	Paused func(approval.Entry)
}

// withDefaults is o (nil: the zero Options) with what is unset filled in, all but the Room
// (room makes it).
func (o *Options) withDefaults() Options {
	var d Options
	if o != nil {
		d = *o
	}
	if d.Name == "" {
		d.Name = "mcp-sandbox"
	}
	if d.Version == "" {
		d.Version = "dev"
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.StateKeys == nil {
		d.StateKeys = RandomStateKeys()
	}
	return d
}

// room is the Room o names, or a new one over its ledger.
func (o *Options) room() *approval.Room {
	if o.Room != nil {
		return o.Room
	}
	var store budget.Pauses
	if o.Ledger != nil {
		store = o.Ledger
	}
	return approval.NewRoom(store, &approval.RoomOptions{Poll: o.PausePoll, Notify: o.Paused, Logger: o.Logger})
}

// NewServer returns an MCP server offering a's tools. It serves any number of sessions.
func NewServer(a Agent, opts *Options) *mcp.Server {
	o := opts.withDefaults()
	s := mcp.NewServer(&mcp.Implementation{Name: o.Name, Version: o.Version}, &mcp.ServerOptions{
		Instructions: instructions(a),
		Logger:       o.Logger,
	})
	h := &handlers{agent: a, srv: s, opts: o, stateKeys: o.StateKeys, room: o.room(), log: o.Logger.With("tenant", a.Tenant, "agent", a.Name),
		exposed: map[string]string{}, runs: map[*mcp.ServerSession]string{}, report: telemetry.For(o.Metrics, a.Tenant, a.Name)}
	o.Drain.add(h)
	if u := a.Upstreams; u != nil && u.Expose {
		// tools/list and a direct call are turn boundaries too: the exposed set is brought up
		// to date before go-sdk looks the tool up, so a host that calls before listing, or
		// calls a tool that was just withdrawn, gets the current set.
		s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				switch method {
				case "tools/list":
					h.turn(ctx)
				case "tools/call":
					if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && strings.Contains(p.Name, upstream.Separator) {
						h.turn(ctx)
					}
				}
				return next(ctx, method, req)
			}
		})
	}
	s.AddReceivingMiddleware(h.traceCalls) // outermost: the span covers the whole call
	if u := a.Upstreams; u != nil && u.Watch != nil {
		u.Watch(h.resync)
	}
	if a.CodeExecution != nil {
		s.AddTool(&mcp.Tool{
			Name:         ToolRunCode,
			Title:        "Run a Python program",
			Description:  runCodeDescription(a.CodeExecution),
			InputSchema:  json.RawMessage(`{"type":"object","properties":{"code":{"type":"string","description":"the Python program"}},"required":["code"],"additionalProperties":false}`),
			OutputSchema: runCodeOutputSchema(),
			Annotations:  &mcp.ToolAnnotations{OpenWorldHint: ptr(a.CodeExecution.Terms.Network != engine.NetworkNone)},
		}, h.runCode)
	}
	s.AddTool(&mcp.Tool{
		Name:        ToolListTools,
		Title:       "List the tools programs can call",
		Description: "Lists the tools run_code programs can call, deferred ones included, with one-line descriptions. query (words for the tool wanted) ranks them, best first with scores and how many matched; server keeps one server's; cursor is the previous page's next_cursor.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"server":{"type":"string"},"query":{"type":"string"},"cursor":{"type":"string"}},"additionalProperties":false}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, h.listTools)
	s.AddTool(&mcp.Tool{
		Name:        ToolGetToolInfo,
		Title:       "Describe one tool",
		Description: "One tool's schemas, annotations and python_stub: the typed signature its binding takes (exactly those keywords; the return type declared, or observed from results).",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","description":"<server>__<tool>"}},"required":["name"],"additionalProperties":false}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, h.getToolInfo)
	s.AddTool(&mcp.Tool{
		Name:        ToolReadToolOutput,
		Title:       "Read a kept output",
		Description: "Reads what a handle keeps (a run_code stream or artifact, a large tool result): limit lines from line offset (0-based), or the lines matching the regular expression pattern, numbered.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"handle":{"type":"string"},"offset":{"type":"integer","minimum":0},"limit":{"type":"integer","minimum":1},"pattern":{"type":"string"}},"required":["handle"],"additionalProperties":false}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, h.readToolOutput)
	return s
}

func ptr[T any](v T) *T { return &v }

func instructions(a Agent) string {
	var b strings.Builder
	fmt.Fprintf(&b, "mcp-sandbox: tenant %q, agent %q, agent version %s.\n", a.Tenant, a.Name, a.Version)
	if a.CodeExecution != nil {
		b.WriteString("Use run_code to run one Python program per call in a fresh, contained workspace; " +
			"a program can call the tools list_tools names. Prefer one program that does a whole task " +
			"(loops, filtering, joining results) over many small tool calls.\n")
	} else {
		b.WriteString("This agent may not run code; list_tools, get_tool_info and read_tool_output describe the tools available.\n")
	}
	return b.String()
}

// runCodeDescription teaches the model the contract and the limits in force.
func runCodeDescription(ce *CodeExec) string {
	t := ce.Terms
	var b strings.Builder
	b.WriteString(`Runs one Python 3 program in a fresh, contained process and empty working directory; nothing is kept between calls, so do the whole task in one program.
- Top-level await and return work; the value is what it returns, else its last expression's (value_repr if JSON cannot carry it).
- stdout and stderr come back as head-and-tail previews; read_tool_output reads the rest by handle.
- Tools are async functions: await <server>__<tool>(arg=1) where the name is a Python identifier, with exactly the keywords of get_tool_info's python_stub, or await call_tool("<server>__<tool>", {"arg": 1}). TOOLS is the tuple of names it may call; list_tools(), get_tool_info(name), read_tool_output(handle, ...) and budget.remaining() can be awaited too.
- A failed call raises ToolError (.tool, .kind: invalid_arguments, denied, budget_exceeded, timeout, ...). A result too large to hand over is a ToolResultHandle: await .read(offset=, limit=) or .read(pattern=).
- A call needing a person's approval waits while they are asked, if this host can ask; declined, it raises ToolError kind denied; unanswered or unaskable, kind approval_required_in_program.
A failed program is an error result with its traceback; failure.executed false means nothing ran.
`)
	fmt.Fprintf(&b, "Limits in force: %s.", termsText(t))
	if ce.Refusal != "" {
		fmt.Fprintf(&b, " Note: programs are currently refused: %s.", ce.Refusal)
	} else if u, ok := ce.Sandbox.(UnavailableSandbox); ok {
		fmt.Fprintf(&b, " Note: programs are currently refused: %s.", strings.TrimSuffix(u.Unavailable(), "."))
	}
	return b.String()
}

func termsText(t engine.Terms) string {
	return fmt.Sprintf("%s, isolation %s", limitsText(t), t.Isolation)
}

// limitsText is the terms but their isolation level, which a result says beside the level
// reached.
func limitsText(t engine.Terms) string {
	network := t.Network
	if network == "" {
		network = engine.NetworkNone
	}
	return fmt.Sprintf("wall clock %gs, CPU %gs, memory %s, file size %s, %d processes, network %s",
		t.WallSeconds, t.CPUSeconds, bytesText(t.MemoryBytes), bytesText(t.FileSizeBytes), t.ProcessCount, network)
}

// isolationText says the level the terms asked for and the one the execution reached (at
// least that one: a stronger level is no downgrade, and reads as none).
func isolationText(asked, got engine.Level) string {
	if got == "" {
		got = "none (nothing ran)"
	}
	return fmt.Sprintf("asked for %s, got %s", asked, got)
}

func bytesText(n int64) string {
	switch {
	case n <= 0:
		return "unlimited"
	case n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

type handlers struct {
	agent  Agent
	srv    *mcp.Server
	opts   Options
	log    *slog.Logger
	report telemetry.Reporter

	// runsMu guards runs (the Run id of each live session: a stdio session, which has no MCP
	// session id, and a sessionless HTTP request's throwaway session included, removed when
	// the session ends) and closed (no watcher starts).
	runsMu   sync.Mutex
	runs     map[*mcp.ServerSession]string
	closed   bool
	watchers sync.WaitGroup // watchSession's goroutines

	// exposedMu guards exposed: the upstream tools currently offered directly, name → the
	// definition's JSON, so a sync changes only what changed.
	exposedMu sync.Mutex
	exposed   map[string]string

	// room keeps the questions of calls that need a person's approval (package approval);
	// holds are the calls held across the round trips of an approval (mrtr.go), whose
	// requestStates are sealed under stateKeys.
	room      *approval.Room
	holds     holds
	stateKeys *StateKeys
}

func toolError(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

// decodeArgs decodes a call's arguments strictly; a mismatch is a tool error the model can fix.
func decodeArgs(req *mcp.CallToolRequest, v any) *mcp.CallToolResult {
	raw := req.Params.Arguments
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return toolError("invalid arguments for %s: %v", req.Params.Name, err)
	}
	return nil
}

func (h *handlers) runCode(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Code *string `json:"code"`
	}
	if bad := decodeArgs(req, &in); bad != nil {
		return bad, nil
	}
	if in.Code == nil {
		return toolError("invalid arguments for run_code: code is required (the whole Python program as a string)"), nil
	}
	if len(*in.Code) > maxCodeBytes {
		return toolError("the program is %d bytes, over the %d-byte limit for one run_code call; write a shorter program", len(*in.Code), maxCodeBytes), nil
	}
	return h.serveCall(ctx, req, func(ctx context.Context, env callEnv) *mcp.CallToolResult {
		ctx, end, ok := h.opts.Drain.begin(ctx)
		if !ok {
			return toolError("the server is shutting down; nothing ran")
		}
		res := h.execute(ctx, req, *in.Code, env)
		end()
		out := renderResult(res, h.agent.Version)
		out.Content = append(out.Content, imageContents(res, h.agent.ImageInlineBytes)...)
		return out
	}), nil
}

// progress sends notifications/progress for one call. A send never blocks the engine: it runs
// on its own goroutine with a short deadline, and a tick is dropped while the previous send
// is still in flight. wait waits for the last send.
type progress struct {
	ctx  context.Context
	ss   *mcp.ServerSession
	tok  any
	busy atomic.Bool
	wg   sync.WaitGroup
}

func newProgress(ctx context.Context, ss *mcp.ServerSession, tok any) *progress {
	return &progress{ctx: ctx, ss: ss, tok: tok}
}

func (p *progress) report(elapsed float64) {
	if !p.busy.CompareAndSwap(false, true) {
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer p.busy.Store(false)
		ctx, cancel := context.WithTimeout(p.ctx, 2*time.Second)
		defer cancel()
		_ = p.ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: p.tok,
			Progress:      elapsed,
			Message:       fmt.Sprintf("program running for %.0fs", elapsed),
		})
	}()
}

func (p *progress) wait() { p.wg.Wait() }

// renderResult is the run_code CallToolResult: the execution.Result as structuredContent and a compact
// text rendering for the model.
func renderResult(res *execution.Result, version string) *mcp.CallToolResult {
	out := &mcp.CallToolResult{
		IsError:           res.Failure != nil,
		StructuredContent: res,
		Content:           []mcp.Content{&mcp.TextContent{Text: RenderText(res)}},
	}
	if version != "" {
		out.Meta = mcp.Meta{MetaAgentVersion: version}
	}
	return out
}

// RenderText is the compact text rendering of a Result that the model reads.
func RenderText(res *execution.Result) string {
	var b strings.Builder
	switch f := res.Failure; {
	case f == nil:
		b.WriteString("completed")
	case !f.Executed && f.Kind.Refusal():
		fmt.Fprintf(&b, "refused (%s): %s", f.Kind, f.Message)
	default:
		fmt.Fprintf(&b, "failed (%s): %s", f.Kind, f.Message)
	}
	fmt.Fprintf(&b, " in %.3fs\n", res.DurationSeconds)
	if res.Cancelled {
		b.WriteString("cancelled: true\n")
	}
	if res.LimitHit != nil {
		fmt.Fprintf(&b, "limit_hit: %s\n", *res.LimitHit)
	}
	if res.Failure == nil || res.Failure.Executed {
		b.WriteString(valueLine(res))
	}
	writeStream(&b, "stdout", res.Stdout, res.StdoutSize, res.Attachments)
	writeStream(&b, "stderr", res.Stderr, res.StderrSize, res.Attachments)
	if res.Failure != nil && res.Failure.Traceback != "" {
		fmt.Fprintf(&b, "traceback:\n%s\n", strings.TrimRight(res.Failure.Traceback, "\n"))
	}
	for _, a := range res.Artifacts {
		b.WriteString(artifactText(a))
	}
	if len(res.Unavailable) > 0 {
		fmt.Fprintf(&b, "unavailable bindings: %s\n", strings.Join(res.Unavailable, ", "))
	}
	if a := res.Approvals; a.Asked+a.Unasked > 0 {
		fmt.Fprintf(&b, "approvals: %d asked (%d accepted, %d declined, %d timed out), %d refused without asking (this host cannot ask)\n",
			a.Asked, a.Accepted, a.Declined, a.TimedOut, a.Unasked)
	}
	for _, u := range res.UpstreamProblems {
		fmt.Fprintf(&b, "note on server %s: %s\n", u.Server, oneLine(u.Problem))
	}
	if n := res.Network; n != nil {
		// The egress proxy's decisions: the first refusals with their reasons (the whole list
		// is in structuredContent).
		fmt.Fprintf(&b, "network: %d requests allowed, %d refused", n.Allowed, len(n.Refused))
		const shown = 5
		var parts []string
		for i, r := range n.Refused {
			if i == shown {
				parts = append(parts, fmt.Sprintf("%d more", len(n.Refused)-shown))
				break
			}
			parts = append(parts, fmt.Sprintf("%s:%d %s", r.Host, r.Port, r.Reason))
		}
		if len(parts) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(parts, ", "))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "terms: %s; isolation %s", limitsText(res.Terms), isolationText(res.Terms.Isolation, res.Isolation))
	if res.IsolationFallback != "" {
		fmt.Fprintf(&b, " (%s)", res.IsolationFallback)
	}
	return b.String()
}

// artifactText renders one artifact: a small text one whole (the engine put it in Text, up
// to the profile's preview size), so the model reads it without a read_tool_output call;
// any other by name, size, type and handle.
func artifactText(a outputs.Attachment) string {
	handle := a.Handle
	if handle == "" {
		handle = "none (not kept)"
		if a.Reason != "" {
			handle = "none (not kept: " + a.Reason + ")"
		}
	}
	if a.Text != nil {
		return fmt.Sprintf("artifact %s (%d bytes, handle %s):\n%s\n", a.Name, a.Size, handle, strings.TrimRight(*a.Text, "\n"))
	}
	return fmt.Sprintf("artifact %s: %d bytes, %s, handle %s\n", a.Name, a.Size, a.ContentType, handle)
}

// valueLine renders the program's value: its JSON, or, for a value JSON cannot carry, its
// repr said to be one. Either is previewed when long: the whole is in structuredContent (and
// under a handle when a blob store is there).
func valueLine(res *execution.Result) string {
	label, v, name := "value", string(res.Value), "value"
	if res.ValueRepr != nil {
		label, v, name = "value (no JSON for it; its repr)", *res.ValueRepr, "value_repr"
	}
	if v == "" {
		v = "null"
	}
	if len(v) > execution.ValuePreviewBytes {
		v = outputs.Preview([]byte(v), []byte(v), int64(len(v)), execution.ValuePreviewBytes)
		for _, a := range res.Attachments {
			if a.Name == name && a.Handle != "" {
				v += fmt.Sprintf("\n(%s: %d bytes; read_tool_output handle %s pages the rest)", name, a.Size, a.Handle)
			}
		}
	}
	return fmt.Sprintf("%s: %s\n", label, v)
}

func writeStream(b *strings.Builder, name, preview string, size int64, atts []outputs.Attachment) {
	if size == 0 && preview == "" {
		return
	}
	fmt.Fprintf(b, "%s (%d bytes", name, size)
	for _, a := range atts {
		switch {
		case a.Name != name || !a.Truncated:
		case a.Handle != "":
			fmt.Fprintf(b, ", preview only; read_tool_output handle %s", a.Handle)
		case a.Location == "preview_only" && a.Reason != "":
			fmt.Fprintf(b, ", preview only; the rest was not kept: %s", a.Reason)
		case a.Location == "preview_only":
			b.WriteString(", preview only; the rest was not kept")
		}
	}
	fmt.Fprintf(b, "):\n%s\n", strings.TrimRight(preview, "\n"))
}

func (h *handlers) listTools(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in upstream.ListToolsArgs
	if bad := decodeArgs(req, &in); bad != nil {
		return bad, nil
	}
	t := h.turn(ctx)
	if t == nil {
		if in.Cursor != "" {
			return toolError("unknown cursor %q: start again without one", in.Cursor), nil
		}
		return &mcp.CallToolResult{
			StructuredContent: map[string]any{"tools": []any{}, "next_cursor": nil},
			Content:           []mcp.Content{&mcp.TextContent{Text: "No tools are available to programs: this agent is granted no upstream servers."}},
		}, nil
	}
	page, err := t.ListTools(in)
	if err != nil {
		return toolError("%v", err), nil
	}
	return &mcp.CallToolResult{StructuredContent: page, Content: []mcp.Content{&mcp.TextContent{Text: listToolsText(page)}}}, nil
}

func (h *handlers) getToolInfo(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Name string `json:"name"`
	}
	if bad := decodeArgs(req, &in); bad != nil {
		return bad, nil
	}
	t := h.turn(ctx)
	if t == nil {
		return toolError("unknown tool %q: list_tools names the tools available (none at present)", in.Name), nil
	}
	info, fe := t.ToolInfo(ctx, in.Name)
	if fe != nil {
		return toolError("%s (%s); list_tools names the tools available", fe.Message, fe.Kind), nil
	}
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return toolError("the description of %s could not be encoded", in.Name), nil
	}
	// The model reads the stub as Python, not as a JSON string full of escapes: the text is the
	// description without it, compact and with <, > and & as they are (indentation was a fifth
	// of it, on every tool described), then the stub itself.
	var text strings.Builder
	enc := json.NewEncoder(&text)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(struct {
		upstream.ToolInfo
		PythonStub string `json:"python_stub,omitempty"` // shadows the embedded one: left out
	}{ToolInfo: info}); err != nil {
		return toolError("the description of %s could not be encoded", in.Name), nil
	}
	text.WriteString("\npython_stub:\n" + info.PythonStub)
	return &mcp.CallToolResult{StructuredContent: json.RawMessage(b), Content: []mcp.Content{&mcp.TextContent{Text: text.String()}}}, nil
}
