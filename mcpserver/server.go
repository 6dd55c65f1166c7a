package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
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
	// Programs is how the agent is offered its tenant's saved programs (programs.go).
	Programs Programs
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
	// TaskRetention is how long run_code's MCP tasks are kept at most (tasks.go): the
	// config's approvals.retention_hours; zero means DefaultTaskRetention.
	TaskRetention time.Duration
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
	so := &mcp.ServerOptions{Instructions: instructions(a), Logger: o.Logger}
	if a.CodeExecution != nil && o.Ledger != nil {
		// run_code's tasks (tasks.go), as the extension of 2026-07-28 declares them; the
		// rest of the capabilities as go-sdk infers them, and logging, its default without
		// Capabilities, kept, so a client that asks for no task sees what it saw before.
		//lint:ignore SA1019 go-sdk's own default, deprecated only from 2026-07-28 on
		so.Capabilities = &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}}
		so.Capabilities.AddExtension(TasksExtension, nil)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: o.Name, Version: o.Version}, so)
	h := &handlers{agent: a, srv: s, opts: o, stateKeys: o.StateKeys, room: o.room(), log: o.Logger.With("tenant", a.Tenant, "agent", a.Name),
		exposed: map[string]string{}, saved: map[string]string{}, runs: map[*mcp.ServerSession]string{}, report: telemetry.For(o.Metrics, a.Tenant, a.Name)}
	o.Drain.add(h)
	if u := a.Upstreams; (u != nil && (u.Expose || a.CodeExecution != nil)) || (a.CodeExecution != nil && o.Ledger != nil) {
		// tools/list and a direct call are turn boundaries too: the exposed set, and whether
		// run_code is read-only, are brought up to date before go-sdk lists or looks the tool
		// up, so a host that calls before listing, or calls a tool that was just withdrawn,
		// gets the current set.
		s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				switch method {
				case "tools/list":
					h.listing(ctx)
				case "tools/call":
					if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && strings.Contains(p.Name, upstream.Separator) {
						t := h.turn(ctx)
						if strings.HasPrefix(p.Name, h.agent.Programs.prefix()+upstream.Separator) {
							h.syncPrograms(ctx, t) // a program saved since the host listed
						}
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
		// Read-only from the start only without upstreams: with them, the first turn (at the
		// first tools/list) decides (syncReadOnly).
		h.addRunCode(a.Upstreams == nil && a.CodeExecution.Terms.Network == engine.NetworkNone)
		if a.Programs.Propose && o.Ledger != nil {
			h.addSaveProgram()
		}
		if o.Ledger != nil {
			h.addTaskMethods(s)
		}
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

// addRunCode adds (or replaces, which sends tools/list_changed) run_code, annotated readOnly
// as given.
func (h *handlers) addRunCode(readOnly bool) {
	ce := h.agent.CodeExecution
	h.srv.AddTool(&mcp.Tool{
		Name:         ToolRunCode,
		Title:        "Run a Python program",
		Description:  runCodeDescription(ce),
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"code":{"type":"string","description":"the Python program"},"rehearse":{"type":"boolean","description":"list the calls that would change something instead of making them, as a plan a person approves at once"}},"required":["code"],"additionalProperties":false}`),
		OutputSchema: runCodeOutputSchema(),
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: readOnly, OpenWorldHint: ptr(ce.Terms.Network != engine.NetworkNone)},
	}, h.runCode)
	h.readOnly.Store(readOnly)
}

// syncReadOnly annotates run_code readOnlyHint exactly when nothing a program can reach
// changes the world outside its sandbox (docs/design.md §14.2): its terms grant no network,
// and every tool t binds it to is read-only (upstream.Turn.ReadOnly). Hosts run read-only
// tools of one turn at once (Claude Code does), and others one after another. A change
// replaces the tool, which sends tools/list_changed.
func (h *handlers) syncReadOnly(t *upstream.Turn) {
	ce := h.agent.CodeExecution
	if ce == nil {
		return
	}
	ro := ce.Terms.Network == engine.NetworkNone && (t == nil || t.ReadOnly())
	h.readOnlyMu.Lock()
	defer h.readOnlyMu.Unlock()
	if h.readOnly.Load() != ro {
		h.addRunCode(ro)
	}
}

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
	network := t.Network
	if network == "" {
		network = engine.NetworkNone
	}
	return fmt.Sprintf("wall clock %gs, CPU %gs, memory %s, file size %s, %d processes, network %s, isolation %s",
		t.WallSeconds, t.CPUSeconds, bytesText(t.MemoryBytes), bytesText(t.FileSizeBytes), t.ProcessCount, network, t.Isolation)
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

	// readOnly is run_code's readOnlyHint as listed; readOnlyMu serialises its changes.
	readOnly   atomic.Bool
	readOnlyMu sync.Mutex

	// exposedMu guards exposed: the upstream tools currently offered directly, name → the
	// definition's JSON, so a sync changes only what changed.
	exposedMu sync.Mutex
	exposed   map[string]string

	// savedMu guards saved: the saved programs currently offered as tools (programs.go), name
	// → the definition's JSON.
	savedMu sync.Mutex
	saved   map[string]string
	offered []budget.SavedProgram // the programs saved holds the tools of, a program may call

	// room keeps the questions of calls that need a person's approval (package approval);
	// holds are the calls held across the round trips of an approval (mrtr.go), whose
	// requestStates are sealed under stateKeys.
	room      *approval.Room
	holds     holds
	stateKeys *StateKeys

	// tasks are the MCP tasks this process runs (tasks.go).
	tasks runningTasks
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
	prog, bad := runCodeArgs(req)
	if bad != nil {
		return bad, nil
	}
	return h.serveCall(ctx, req, func(ctx context.Context, env callEnv) *mcp.CallToolResult {
		ctx, end, ok := h.opts.Drain.begin(ctx)
		if !ok {
			return toolError("the server is shutting down; nothing ran")
		}
		res := h.execute(ctx, req, prog, env)
		end()
		return h.render(res)
	}), nil
}

// render is run_code's result of res, as a call or a task ends with it: what the model
// reads, the whole report in _meta, and the images the program showed.
func (h *handlers) render(res *execution.Result) *mcp.CallToolResult {
	out := renderResult(res, h.agent.CodeExecution.Budget, h.agent.Version)
	out.Content = append(out.Content, imageContents(res, h.agent.ImageInlineBytes)...)
	return out
}

// runCodeArgs are run_code's arguments: the program (its code, and whether it is a
// rehearsal), or the tool error that refuses them.
func runCodeArgs(req *mcp.CallToolRequest) (p execution.Program, bad *mcp.CallToolResult) {
	var in struct {
		Code     *string `json:"code"`
		Rehearse bool    `json:"rehearse"`
	}
	if bad := decodeArgs(req, &in); bad != nil {
		return p, bad
	}
	if in.Code == nil {
		return p, toolError("invalid arguments for run_code: code is required (the whole Python program as a string)")
	}
	if len(*in.Code) > maxCodeBytes {
		return p, toolError("the program is %d bytes, over the %d-byte limit for one run_code call; write a shorter program", len(*in.Code), maxCodeBytes)
	}
	return execution.Program{Code: *in.Code, Rehearse: in.Rehearse}, nil
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

func (p *progress) report(elapsed float64, _ *outputs.Capture) {
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

// renderResult is the run_code CallToolResult: what the model reads (Lean) as
// structuredContent and as text, and the whole report in _meta (MetaReport).
func renderResult(res *execution.Result, limits budget.Limits, version string) *mcp.CallToolResult {
	m := Lean(res, limits)
	out := &mcp.CallToolResult{
		IsError:           res.Failure != nil,
		StructuredContent: m,
		Content:           []mcp.Content{&mcp.TextContent{Text: RenderText(m)}},
		Meta:              mcp.Meta{MetaReport: res},
	}
	if version != "" {
		out.Meta[MetaAgentVersion] = version
	}
	return out
}

// RenderText is the text rendering of what a model reads of a result (Lean): the text
// content of run_code's result, which hosts show their model for a failed one.
func RenderText(m *ModelResult) string {
	var b strings.Builder
	switch f := m.Failure; {
	case f == nil:
		b.WriteString("completed\n")
	case !f.Executed && f.Kind.Refusal():
		fmt.Fprintf(&b, "refused (%s): %s\n", f.Kind, f.Message)
	default:
		fmt.Fprintf(&b, "failed (%s): %s\n", f.Kind, f.Message)
	}
	if m.Cancelled {
		b.WriteString("cancelled: true\n")
	}
	if m.LimitHit != nil {
		fmt.Fprintf(&b, "limit_hit: %s (%s)\n", *m.LimitHit, m.Limit)
	}
	if m.Failure == nil || m.Failure.Executed {
		b.WriteString(valueLine(m))
	}
	writeStream(&b, "stdout", m.Stdout, m.Attachments)
	writeStream(&b, "stderr", m.Stderr, m.Attachments)
	if m.Failure != nil && m.Failure.Traceback != "" {
		fmt.Fprintf(&b, "traceback:\n%s\n", strings.TrimRight(m.Failure.Traceback, "\n"))
	}
	for _, a := range m.Artifacts {
		b.WriteString(artifactText(a))
	}
	for _, o := range m.ArtifactsOmitted {
		fmt.Fprintf(&b, "not collected: %s (%s)\n", o.Path, o.Reason)
	}
	if len(m.Unavailable) > 0 {
		fmt.Fprintf(&b, "unavailable bindings: %s\n", strings.Join(m.Unavailable, ", "))
	}
	if a := m.Approvals; a != nil {
		fmt.Fprintf(&b, "approvals: %d asked (%d accepted, %d declined, %d timed out), %d refused without asking (this host cannot ask)\n",
			a.Asked, a.Accepted, a.Declined, a.TimedOut, a.Unasked)
	}
	for _, u := range m.UpstreamProblems {
		fmt.Fprintf(&b, "note on server %s: %s\n", u.Server, oneLine(u.Problem))
	}
	if n := m.Network; n != nil {
		fmt.Fprintf(&b, "network: %d requests allowed, refused: %s", n.Allowed, strings.Join(n.Refused, ", "))
		if n.More > 0 {
			fmt.Fprintf(&b, " and %d more", n.More)
		}
		b.WriteString("\n")
	}
	if r := m.Resumed; r != nil {
		fmt.Fprintf(&b, "resumed: %d calls answered from its journal\n", r.ReplayedCalls)
	}
	writeToolCalls(&b, m.ToolCalls, m.ToolCallsOmitted)
	if m.Isolation != "" {
		fmt.Fprintf(&b, "isolation: asked for %s, got %s\n", m.asked, m.Isolation)
	}
	if m.IsolationFallback != "" {
		fmt.Fprintf(&b, "isolation fallback: %s\n", m.IsolationFallback)
	}
	if len(m.Guarantees) > 0 {
		var parts []string
		for _, d := range engine.Dimensions {
			if g, ok := m.Guarantees[d]; ok {
				parts = append(parts, fmt.Sprintf("%s %s", d, g))
			}
		}
		fmt.Fprintf(&b, "guarantees below enforced: %s\n", strings.Join(parts, ", "))
	}
	if len(m.BudgetLeft) > 0 {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(m.BudgetLeft)) {
			parts = append(parts, fmt.Sprintf("%s %d", k, m.BudgetLeft[k]))
		}
		fmt.Fprintf(&b, "budget nearly spent, left for this run: %s\n", strings.Join(parts, ", "))
	}
	return strings.TrimSuffix(b.String(), "\n")
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
// repr said to be one; a value too large to show whole is its head and tail and the handle
// that pages the rest. Nothing when the value is null and there is no repr.
func valueLine(m *ModelResult) string {
	label, v, name := "value", string(m.Value), "value"
	switch {
	case m.ValueRepr != nil:
		label, v, name = "value (no JSON for it; its repr)", *m.ValueRepr, "value_repr"
	case m.ValuePreview != "":
		v = m.ValuePreview
	case v == "":
		return ""
	}
	if m.ValueType != "" {
		label += " (from " + m.ValueType + ")"
	}
	for _, a := range m.Attachments {
		if a.Name == name && a.Handle != "" {
			v += fmt.Sprintf("\n(%s: %d bytes; read_tool_output handle %s pages the rest)", name, a.Size, a.Handle)
		}
	}
	return fmt.Sprintf("%s: %s\n", label, v)
}

// writeStream renders one stream's preview, and, when it was cut, its size and where the rest
// is (or why it is not kept).
func writeStream(b *strings.Builder, name, preview string, atts []outputs.Attachment) {
	if preview == "" {
		return
	}
	b.WriteString(name)
	for _, a := range atts {
		switch {
		case a.Name != name || !a.Truncated:
		case a.Handle != "":
			fmt.Fprintf(b, " (%d bytes, preview only; read_tool_output handle %s)", a.Size, a.Handle)
		case a.Reason != "":
			fmt.Fprintf(b, " (%d bytes, preview only; the rest was not kept: %s)", a.Size, a.Reason)
		default:
			fmt.Fprintf(b, " (%d bytes, preview only; the rest was not kept)", a.Size)
		}
	}
	fmt.Fprintf(b, ":\n%s\n", strings.TrimRight(preview, "\n"))
}

func (h *handlers) listTools(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in upstream.ListToolsArgs
	if bad := decodeArgs(req, &in); bad != nil {
		return bad, nil
	}
	t := h.turn(ctx)
	saved := h.savedSummaries(in)
	if t == nil {
		if in.Cursor != "" {
			return toolError("unknown cursor %q: start again without one", in.Cursor), nil
		}
		if len(saved) > 0 {
			return savedListing(upstream.ListToolsPage{Tools: []upstream.ToolSummary{}}, saved), nil
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
	if len(saved) > 0 {
		return savedListing(page, saved), nil
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
	if p, ok := h.offeredProgram(in.Name); ok {
		return h.savedInfo(p), nil
	}
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
