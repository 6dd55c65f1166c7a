package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

// MetaRun is the _meta key by which a host names the Run a call belongs to; without it the
// Run is the MCP session.
const MetaRun = "mcp-sandbox/run"

// maxRunIDBytes bounds a Run id a host names.
const maxRunIDBytes = 256

// Host-facing read_tool_output bounds: lines per window by default, and the bytes one answer
// may hold (a window wider than this is refused; a search is cut to it).
const (
	defaultReadLines = 100
	maxReadBytes     = 1 << 20
	defaultMatches   = 100
)

// recordTimeout bounds recording work done after the handler's context may have ended.
const recordTimeout = 30 * time.Second

// errNoHandle is the one answer for a handle the caller may not read, whatever the reason:
// it never names the handle, so a foreign handle and a never-issued one read the same.
const errNoHandle = "no output is kept under this handle: it may have expired, or it was never issued to this tenant"

// runOf names the Run of a request: _meta "mcp-sandbox/run" when the host gives one, else
// the MCP session id (a stdio session has none, and gets one id for its lifetime), else, for a
// request of the sessionless revision over HTTP, the request itself (its throwaway session). A
// session's own Run is recorded as ended when the session ends.
func (h *handlers) runOf(req *mcp.CallToolRequest) budget.RunRef {
	ref := budget.RunRef{Tenant: h.agent.Tenant}
	if req != nil && req.Params != nil {
		if v, ok := req.Params.Meta[MetaRun].(string); ok && v != "" && len(v) <= maxRunIDBytes {
			ref.ID = "named:" + v
			return ref
		}
	}
	if req != nil && req.Session != nil {
		h.runsMu.Lock()
		defer h.runsMu.Unlock()
		id, ok := h.runs[req.Session]
		if !ok {
			if sid := req.Session.ID(); sid != "" {
				id = "session:" + sid
			} else if req.Extra != nil && req.Extra.Header != nil && req.Extra.Header.Get(headerProtocolVersion) >= revisionStateless {
				id = budget.NewID("request:r_")
			} else {
				id = budget.NewID("session:s_")
			}
			h.runs[req.Session] = id
			h.watchSession(req.Session, budget.RunRef{Tenant: h.agent.Tenant, ID: id})
		}
		ref.ID = id
		return ref
	}
	ref.ID = budget.NewID("session:s_")
	return ref
}

// watchSession records the end of a session's own Run when the session ends. Called with
// runsMu held.
func (h *handlers) watchSession(ss *mcp.ServerSession, run budget.RunRef) {
	led := h.opts.Ledger
	if led == nil {
		return
	}
	go func() {
		_ = ss.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := led.EndRun(ctx, run); err != nil && !errors.Is(err, budget.ErrNotFound) {
			h.log.Warn("run end not recorded", "run", run.ID, "err", err)
		}
		h.runsMu.Lock()
		delete(h.runs, ss)
		h.runsMu.Unlock()
	}()
}

// execution is one run_code's binding state: its meter, the handles its calls produced (the
// only ones it may read) and where they are kept. It is the engine.ToolCaller of the run.
type execution struct {
	turn   *upstream.Turn // nil: no upstream tools
	meter  *budget.Meter  // nil: nothing is metered (no ledger)
	blobs  outputs.BlobStore
	tenant string
	log    *slog.Logger

	mu      sync.Mutex // guards handles
	handles map[outputs.Handle]bool

	finishing sync.WaitGroup // finish records being written
}

type handleSlotKey struct{}

// handleSlot carries a handle from the budget Caller, deep inside Turn.Call, back to CallTool:
// upstream.Reply has no handle of its own.
type handleSlot struct{ h *engine.ToolHandle }

func (x *execution) CallTool(ctx context.Context, name string, args json.RawMessage) engine.ToolReply {
	if name == ToolReadToolOutput {
		var in struct {
			Handle  string  `json:"handle"`
			Offset  *int    `json:"offset"`
			Limit   *int    `json:"limit"`
			Pattern *string `json:"pattern"`
		}
		if err := json.Unmarshal(args, &in); err != nil {
			return engine.ToolReply{Kind: string(upstream.InvalidArguments), Message: "read_tool_output takes {handle, offset?, limit?, pattern?}"}
		}
		off, lim, pat := 0, defaultReadLines, ""
		if in.Offset != nil {
			off = *in.Offset
		}
		if in.Limit != nil {
			lim = *in.Limit
		}
		if in.Pattern != nil {
			pat = *in.Pattern
		}
		return x.ReadHandle(ctx, in.Handle, off, lim, pat)
	}
	if x.turn == nil {
		return engine.ToolReply{Kind: string(upstream.Unavailable), Message: fmt.Sprintf("no tool named %q is offered to this program; TOOLS lists what is", name)}
	}
	slot := &handleSlot{}
	r := x.turn.Call(context.WithValue(ctx, handleSlotKey{}, slot), name, args)
	if r.Kind == "" && slot.h != nil {
		return engine.ToolReply{Handle: slot.h}
	}
	return engine.ToolReply{Value: r.Value, Kind: string(r.Kind), Message: r.Message}
}

// CallUpstream is the budget Caller: admission before the upstream is touched, the ledger's
// finish record after, and the per-call transfer ceiling (a larger result becomes a handle).
func (x *execution) CallUpstream(ctx context.Context, c upstream.Call, next func(context.Context) upstream.Reply) upstream.Reply {
	if x.meter == nil {
		return next(ctx)
	}
	tk, fe := x.meter.Admit(ctx, budget.Call{Tool: c.Tool.Name, ArgumentBytes: int64(len(c.Args))})
	if fe != nil {
		return upstream.Reply{Kind: replyKind(fe.Kind), Message: fe.Message}
	}
	r := next(ctx)
	o := budget.Outcome{Status: budget.Succeeded, ProducedBytes: int64(r.Size)}
	defer func() {
		// The finish record is written while the result travels to the program: the call was
		// spent when it started, and a crash before this lands is recorded unknown. execute
		// waits for every finish before it reads the meters or ends the execution.
		o := o
		x.finishing.Add(1)
		go func() {
			defer x.finishing.Done()
			if err := tk.Finish(context.WithoutCancel(ctx), o); err != nil {
				x.log.Error("tool_call_finished not recorded", "call", tk.ID(), "err", err)
			}
		}()
	}()
	if r.Kind != "" {
		o.Status, o.Kind, o.Message = budget.Failed, string(r.Kind), r.Message
		if r.Kind == upstream.Cancelled {
			o.Status = budget.Aborted
		}
		return r
	}
	// The bytes are promised before they cross: calls racing for the last of the budget
	// cannot all have it.
	if tk.Reserve(budget.Usage{TransferBytes: int64(len(r.Value))}) {
		o.TransferBytes = int64(len(r.Value))
		return r
	}
	allow := tk.TransferAllowance()
	slot, _ := ctx.Value(handleSlotKey{}).(*handleSlot)
	if x.blobs == nil || slot == nil {
		o.Status, o.Kind = budget.Failed, string(upstream.BindingResultNotPaged)
		o.Message = fmt.Sprintf("the result of %s is %d bytes, over the %d bytes this call may hand over, and there is no blob store to keep it under a handle", c.Tool.Name, len(r.Value), allow)
		return upstream.Reply{Kind: upstream.BindingResultNotPaged, Message: o.Message, Size: r.Size, Called: true}
	}
	content, ctype := handleContent(r.Value)
	limit := min(x.meter.PreservedAllowance(), math.MaxInt64-1)
	h, n, err := x.blobs.Put(ctx, x.tenant, c.Tool.Name, ctype, bytes.NewReader(content), limit)
	if err != nil {
		x.log.Warn("binding result not preserved", "tool", c.Tool.Name, "bytes", len(content), "err", err)
		o.Status, o.Kind = budget.Failed, string(upstream.BindingResultNotPaged)
		o.Message = fmt.Sprintf("the result of %s is %d bytes, over the %d bytes this call may hand over, and it could not be kept under a handle", c.Tool.Name, len(r.Value), allow)
		return upstream.Reply{Kind: upstream.BindingResultNotPaged, Message: o.Message, Size: r.Size, Called: true}
	}
	th := &engine.ToolHandle{ID: string(h), Size: n, Lines: lineCount(content)}
	hj, _ := json.Marshal(map[string]any{"id": th.ID, "size": th.Size, "lines": th.Lines})
	if !tk.Reserve(budget.Usage{PreservedBytes: n, TransferBytes: int64(len(hj))}) {
		// A concurrent call took what was left between the store's limit and now.
		_ = x.blobs.Delete(ctx, x.tenant, h)
		o.Status, o.Kind = budget.Failed, string(upstream.BindingResultNotPaged)
		o.Message = fmt.Sprintf("the result of %s is %d bytes, over the %d bytes this call may hand over, and the budget has no room left to keep it under a handle", c.Tool.Name, len(r.Value), allow)
		return upstream.Reply{Kind: upstream.BindingResultNotPaged, Message: o.Message, Size: r.Size, Called: true}
	}
	x.mu.Lock()
	x.handles[h] = true
	x.mu.Unlock()
	slot.h = th
	o.TransferBytes = int64(len(hj))
	o.PreservedBytes = n
	o.Attachments, _ = json.Marshal([]engine.Attachment{{Name: c.Tool.Name, Handle: string(h), ContentType: ctype, Size: n, Truncated: true, Location: "blob"}})
	return upstream.Reply{Size: r.Size, Called: true}
}

// handleContent is what a handle keeps of a value: a string's text (so its lines are the
// text's lines), or the value's JSON indented by two spaces, so that line windows
// (handle.read(offset, limit), read_tool_output) can be narrower than the whole value.
func handleContent(v json.RawMessage) ([]byte, string) {
	var s string
	if len(v) > 0 && v[0] == '"' && json.Unmarshal(v, &s) == nil {
		return []byte(s), "text/plain"
	}
	var b bytes.Buffer
	b.Grow(len(v) + len(v)/4)
	if json.Indent(&b, v, "", "  ") != nil {
		return v, "application/json"
	}
	return b.Bytes(), "application/json"
}

func lineCount(b []byte) int {
	n := bytes.Count(b, []byte("\n"))
	if len(b) > 0 && b[len(b)-1] != '\n' {
		n++
	}
	return n
}

func replyKind(k failure.Kind) upstream.Kind {
	switch k {
	case budget.BudgetExceeded:
		return upstream.BudgetExceeded
	case budget.ArgumentTooLarge:
		return upstream.ArgumentTooLarge
	case failure.Cancelled:
		return upstream.Cancelled
	}
	return upstream.UpstreamError
}

// ReadHandle serves a window of one of this execution's own handles, charged to the
// transfer meter. A window wider than what may cross in one piece is binding_result_too_large.
func (x *execution) ReadHandle(ctx context.Context, handle string, offset, limit int, pattern string) engine.ToolReply {
	h := outputs.Handle(handle)
	x.mu.Lock()
	own := x.handles[h]
	x.mu.Unlock()
	if !own || x.blobs == nil {
		return engine.ToolReply{Kind: string(upstream.Unavailable), Message: "no handle of this execution is known"}
	}
	allow := int64(math.MaxInt64)
	if x.meter != nil {
		allow = x.meter.TransferAllowance()
	}
	var value any
	if pattern != "" {
		maxBytes := int(min(allow, maxReadBytes*16))
		if limit <= 0 {
			limit = defaultMatches
		}
		m, err := outputs.BlobSearch(ctx, x.blobs, x.tenant, h, pattern, limit, max(maxBytes-4096, 0))
		if err != nil {
			return readError(err)
		}
		value = matchesValue(m)
	} else {
		w, err := outputs.BlobLines(ctx, x.blobs, x.tenant, h, offset, limit)
		if err != nil {
			return readError(err)
		}
		value = windowValue(w)
	}
	b, err := json.Marshal(value)
	if err != nil {
		return engine.ToolReply{Kind: string(upstream.UpstreamError), Message: "the window could not be encoded"}
	}
	if int64(len(b)) > allow {
		return engine.ToolReply{Kind: string(upstream.BindingResultTooLarge),
			Message: fmt.Sprintf("this window is %d bytes, over the %d bytes that may cross in one piece; ask for fewer lines", len(b), allow)}
	}
	if x.meter != nil {
		ok, err := x.meter.TryCharge(ctx, budget.Usage{TransferBytes: int64(len(b))})
		if err != nil {
			x.log.Error("handle read not charged", "err", err)
			return engine.ToolReply{Kind: string(upstream.UpstreamError), Message: "the read could not be recorded, so it was not served"}
		}
		if !ok {
			return engine.ToolReply{Kind: string(upstream.BindingResultTooLarge),
				Message: fmt.Sprintf("this window is %d bytes, over what is left of the transfer budget; ask for fewer lines", len(b))}
		}
	}
	return engine.ToolReply{Value: b}
}

func readError(err error) engine.ToolReply {
	switch {
	case errors.Is(err, outputs.ErrNoBlob):
		return engine.ToolReply{Kind: string(upstream.Unavailable), Message: "no handle of this execution is known"}
	case errors.Is(err, outputs.ErrBadWindow), errors.Is(err, outputs.ErrBadPattern):
		return engine.ToolReply{Kind: string(upstream.InvalidArguments), Message: err.Error()}
	}
	return engine.ToolReply{Kind: string(upstream.UpstreamError), Message: "the handle could not be read"}
}

type windowJSON struct {
	Text       string `json:"text"`
	Offset     int    `json:"offset"`
	Count      int    `json:"count"`
	TotalLines int    `json:"total_lines"`
	More       bool   `json:"more"`
}

func windowValue(w outputs.Window) windowJSON {
	return windowJSON{Text: w.Text, Offset: w.Offset, Count: w.Count, TotalLines: w.TotalLines, More: w.More}
}

type matchJSON struct {
	Line    int    `json:"line"`
	Text    string `json:"text"`
	Clipped bool   `json:"clipped,omitempty"`
}

type matchesJSON struct {
	Matches    []matchJSON `json:"matches"`
	TotalLines int         `json:"total_lines"`
	Truncated  bool        `json:"truncated"`
}

func matchesValue(m outputs.Matches) matchesJSON {
	out := matchesJSON{Matches: []matchJSON{}, TotalLines: m.TotalLines, Truncated: m.Truncated}
	for _, x := range m.Matches {
		out.Matches = append(out.Matches, matchJSON{Line: x.Line, Text: x.Text, Clipped: x.Clipped})
	}
	return out
}

// directCaller records a host's direct calls in the ledger (started before the upstream is
// touched, finished after), under the request's Run, with no binding budget.
type directCaller struct {
	meter *budget.Meter
	log   *slog.Logger
}

func (d directCaller) CallUpstream(ctx context.Context, c upstream.Call, next func(context.Context) upstream.Reply) upstream.Reply {
	tk, fe := d.meter.Admit(ctx, budget.Call{Tool: c.Tool.Name, ArgumentBytes: int64(len(c.Args))})
	if fe != nil {
		return upstream.Reply{Kind: replyKind(fe.Kind), Message: fe.Message}
	}
	r := next(ctx)
	o := budget.Outcome{Status: budget.Succeeded, ProducedBytes: int64(r.Size), TransferBytes: int64(len(r.Value))}
	if r.Kind != "" {
		o.Status, o.Kind, o.Message, o.TransferBytes = budget.Failed, string(r.Kind), r.Message, 0
		if r.Kind == upstream.Cancelled {
			o.Status = budget.Aborted
		}
	}
	if err := tk.Finish(ctx, o); err != nil {
		d.log.Error("tool_call_finished not recorded", "call", tk.ID(), "err", err)
	}
	return r
}

// ledgerAttachment is an attachment as the ledger keeps it: the result's fields plus, for a
// stream kept as a preview only, how many bytes were let go.
type ledgerAttachment struct {
	engine.Attachment
	LetGoBytes int64 `json:"let_go_bytes,omitempty"`
}

// keepOutputs puts the streams larger than their preview, and every artifact, in the blob
// store, filling in handles and locations; without a store they stay preview_only and the
// bytes let go are counted. It returns the ledger's attachment records and, under preserve
// required, the failure of a stream or artifact that could not be kept.
func (h *handlers) keepOutputs(ctx context.Context, res *engine.Result, meter *budget.Meter) ([]ledgerAttachment, *engine.Failure) {
	ce := h.agent.CodeExecution
	blobs := h.opts.Blobs
	var recs []ledgerAttachment
	var preserved int64
	var lost []string
	keep := func(a *engine.Attachment, data []byte, whole bool) int64 {
		if whole {
			a.Location = "inline"
			return 0
		}
		if blobs == nil {
			a.Location = "preview_only"
			lost = append(lost, a.Name)
			return a.Size
		}
		hd, n, err := blobs.Put(ctx, h.agent.Tenant, a.Name, a.ContentType, bytes.NewReader(data), int64(len(data))+1)
		if err != nil {
			h.log.Warn("output not preserved", "name", a.Name, "err", err)
			a.Location = "preview_only"
			lost = append(lost, a.Name)
			return a.Size
		}
		a.Handle, a.Location = string(hd), "blob"
		preserved += n
		return a.Size - n
	}
	for i := range res.Attachments {
		a := &res.Attachments[i]
		var data []byte
		switch a.Name {
		case "stdout":
			data = res.StdoutData
		case "stderr":
			data = res.StderrData
		default:
			continue
		}
		letGo := keep(a, data, !a.Truncated && a.Location != "preview_only")
		recs = append(recs, ledgerAttachment{Attachment: *a, LetGoBytes: letGo})
	}
	if len(res.Value) > valuePreviewBytes {
		// A large value is an attachment too: the model's text shows a preview, and the
		// whole is kept under a handle, indented so line windows can page it.
		content, ctype := handleContent(res.Value)
		a := engine.Attachment{Name: "value", ContentType: ctype, Size: int64(len(content)), Truncated: true}
		letGo := keep(&a, content, false)
		res.Attachments = append(res.Attachments, a)
		recs = append(recs, ledgerAttachment{Attachment: a, LetGoBytes: letGo})
	}
	for i := range res.Artifacts {
		a := &res.Artifacts[i]
		if i >= len(res.ArtifactFiles) {
			break
		}
		letGo := keep(a, res.ArtifactFiles[i].Data, false)
		recs = append(recs, ledgerAttachment{Attachment: *a, LetGoBytes: letGo})
	}
	if meter != nil && preserved > 0 {
		if err := meter.Charge(ctx, budget.Usage{PreservedBytes: preserved}); err != nil {
			h.log.Error("preserved bytes not charged", "err", err)
		}
	}
	if len(lost) > 0 && ce != nil && ce.PreserveRequired {
		return recs, &engine.Failure{Kind: failure.OutputNotPreserved, Executed: true,
			Message: fmt.Sprintf("preserve is required, but %s could not be kept in the blob store", strings.Join(lost, ", "))}
	}
	return recs, nil
}

func usageOf(u budget.Usage) engine.Usage {
	return engine.Usage{Calls: u.Calls, TransferBytes: u.TransferBytes, ProducedBytes: u.ProducedBytes, PreservedBytes: u.PreservedBytes}
}

// readToolOutput pages any handle of the session's tenant, by line window or regex.
func (h *handlers) readToolOutput(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Handle  string `json:"handle"`
		Offset  *int   `json:"offset"`
		Limit   *int   `json:"limit"`
		Pattern string `json:"pattern"`
	}
	if bad := decodeArgs(req, &in); bad != nil {
		return bad, nil
	}
	blobs := h.opts.Blobs
	if blobs == nil {
		return toolError("%s", errNoHandle), nil
	}
	hd := outputs.Handle(in.Handle)
	if in.Pattern != "" {
		n := defaultMatches
		if in.Limit != nil {
			n = *in.Limit
		}
		m, err := outputs.BlobSearch(ctx, blobs, h.agent.Tenant, hd, in.Pattern, n, maxReadBytes)
		if err != nil {
			return hostReadError(err, h.log), nil
		}
		v := matchesValue(m)
		var b strings.Builder
		for _, x := range v.Matches {
			fmt.Fprintf(&b, "%d: %s\n", x.Line, x.Text)
		}
		if v.Truncated {
			b.WriteString("(more matches were left out; narrow the pattern or raise limit)\n")
		}
		if len(v.Matches) == 0 && !v.Truncated {
			b.WriteString("no line matches\n")
		}
		return &mcp.CallToolResult{StructuredContent: v, Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}, nil
	}
	off, lim := 0, defaultReadLines
	if in.Offset != nil {
		off = *in.Offset
	}
	if in.Limit != nil {
		lim = *in.Limit
	}
	w, err := outputs.BlobLines(ctx, blobs, h.agent.Tenant, hd, off, lim)
	if err != nil {
		return hostReadError(err, h.log), nil
	}
	if len(w.Text) > maxReadBytes {
		return toolError("lines %d to %d are %d bytes, over the %d bytes one read may return; ask for fewer lines", off, off+w.Count-1, len(w.Text), maxReadBytes), nil
	}
	return &mcp.CallToolResult{StructuredContent: windowValue(w), Content: []mcp.Content{&mcp.TextContent{Text: w.Text}}}, nil
}

func hostReadError(err error, log *slog.Logger) *mcp.CallToolResult {
	switch {
	case errors.Is(err, outputs.ErrNoBlob):
		return toolError("%s", errNoHandle)
	case errors.Is(err, outputs.ErrBadWindow), errors.Is(err, outputs.ErrBadPattern):
		return toolError("%v", err)
	}
	log.Error("read_tool_output failed", "err", err)
	return toolError("the output could not be read")
}

// execute runs one program: its execution is recorded and metered in the ledger, its binding
// calls go through the budget Caller, and its outputs are kept under handles afterwards.
func (h *handlers) execute(ctx context.Context, req *mcp.CallToolRequest, code string) *engine.Result {
	ce := h.agent.CodeExecution
	x := &execution{blobs: h.opts.Blobs, tenant: h.agent.Tenant, log: h.log, handles: map[outputs.Handle]bool{}}
	run := h.runOf(req)
	if led := h.opts.Ledger; led != nil {
		m, err := budget.Start(ctx, led, run, "", h.agent.Version, ce.Budget)
		if err != nil {
			if ctx.Err() != nil {
				return engine.Refuse(ce.Terms, failure.Cancelled, "the request was cancelled before the execution started")
			}
			h.log.Error("execution not recorded, so not run", "run", run.ID, "err", err)
			return engine.Refuse(ce.Terms, failure.Internal, "the execution could not be recorded in the run ledger, so it was not run")
		}
		x.meter = m
	}
	ex := engine.Execution{Program: code, Terms: ce.Terms, Tools: x}
	// No upstreams granted is an empty catalogue, not an absent one: list_tools and
	// get_tool_info still answer, and run_code is still refused as excluded_builtin.
	turn := h.turn(ctx)
	if turn == nil {
		turn = upstream.EmptyTurn()
	}
	n := DefaultMaxConcurrentCalls
	if u := h.agent.Upstreams; u != nil && u.MaxConcurrentCalls > 0 {
		n = u.MaxConcurrentCalls
	}
	ex.ToolNames = turn.Names()
	// Limit outside the budget: a call is spent (tool_call_started) only once it has a
	// slot, right before the upstream is reached.
	x.turn = turn.With(upstream.Limit(n), x)
	if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
		p := newProgress(ctx, req.Session, tok)
		defer p.wait()
		ex.Progress = p.report
	}
	res := ce.Sandbox.Run(ctx, ex)
	x.finishing.Wait()
	if x.turn != nil && len(x.turn.Unavailable()) > 0 {
		res.Unavailable = append([]string(nil), x.turn.Unavailable()...)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	recs, fail := h.keepOutputs(rctx, res, x.meter)
	if fail != nil && res.Failure == nil {
		res.Failure = fail
	}
	if x.meter != nil {
		exec, runU, err := x.meter.Usage(rctx)
		if err != nil {
			h.log.Error("run usage not read", "run", run.ID, "err", err)
		}
		res.Budget = engine.BudgetReport{Execution: usageOf(exec), Run: usageOf(runU)}
		status := "completed"
		if res.Failure != nil {
			status = string(res.Failure.Kind)
		}
		if recs == nil {
			recs = []ledgerAttachment{}
		}
		aj, _ := json.Marshal(recs)
		if err := x.meter.End(rctx, status, aj); err != nil {
			h.log.Error("execution end not recorded", "execution", x.meter.ExecutionID(), "err", err)
		}
	}
	return res
}
