package binding

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/approval"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
	"github.com/mcp-sandbox/mcp-sandbox/toolshape"
	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

// DefaultMaxConcurrentCalls is the per-execution cap on binding calls in flight when
// Options.MaxConcurrentCalls is zero.
const DefaultMaxConcurrentCalls = 8

// Options configure an Execution; nil means defaults: no upstream tools, nothing metered, no
// blob store.
type Options struct {
	// Turn is the catalogue narrowed for this execution; nil means upstream.EmptyTurn.
	Turn *upstream.Turn
	// Meter meters and records the calls (budget.Start); nil means nothing is metered or
	// recorded and every result is delivered whole.
	Meter *budget.Meter
	// Blobs keeps a result over the transfer allowance under a handle; nil means such a result
	// is binding_result_not_paged.
	Blobs outputs.BlobStore
	// Tenant owns the handles the calls produce.
	Tenant string
	// Approvals ask a person about calls that need approval; nil asks nobody, so such calls
	// are refused (approval_required_in_program).
	Approvals *approval.Asking
	// MaxConcurrentCalls caps the calls in flight; zero means DefaultMaxConcurrentCalls.
	MaxConcurrentCalls int
	// Logger receives what the operator must know; nil means slog.Default().
	Logger *slog.Logger
	// Report counts each call (telemetry.Metrics); the zero Reporter counts nothing.
	Report telemetry.Reporter
	// Tape, when set, sees every call with its answer (a cassette's recorder), or answers the
	// calls itself (a cassette's player, under `mcp-sandbox replay`); nil sees nothing.
	Tape Tape
	// Rehearse makes the execution a rehearsal (rehearse.go): a call of a tool that is not
	// read-only is listed in its Plan and answered with a stand-in instead of being made.
	Rehearse bool
	// Nested, when set, are the saved programs the program may call like bindings
	// (nested.go); nil means none.
	Nested Nested
	// Reach, when not nil, are the only tools the program may call (a saved program's, whose
	// annotations follow from them: programs.Reach); nil means every bound tool.
	Reach []string
}

// Tape records an execution's calls, or plays them back (package cassette). Its methods are
// called concurrently, one call each per binding call.
type Tape interface {
	// Play answers call seq (numbered from 1 in the order the calls arrive) itself when ok;
	// the call then goes no further.
	Play(seq int, name string, args json.RawMessage) (a toolcall.Answer, ok bool)
	// Record sees a call the walk answered.
	Record(c TapedCall)
	// Tools are names the program may call beside the turn's: those a cassette recorded.
	Tools() []string
	// KeptBytes is how much of a result kept under a handle Record is handed (TapedCall.Kept).
	KeptBytes() int64
}

// TapedCall is one binding call as a Tape records it.
type TapedCall struct {
	Seq  int
	Name string
	// Tool is the tool the name resolved to, nil for a built-in or an unknown name: its
	// definition redacts the arguments (upstream.Tool.RedactArguments).
	Tool     *upstream.Tool
	Args     json.RawMessage
	Answer   toolcall.Answer
	Approval approval.Decision
	Seconds  float64
	// Kept are the first bytes of a result kept under a handle (Answer.Handle), at most the
	// Tape's KeptBytes; Cut says there were more.
	Kept []byte
	Cut  bool
}

// Execution is one run_code's binding state: the turn it calls through, its meter, the handles
// its calls produced (the only ones it may read) and the finish records still being written.
// It is the engine.ToolCaller of the run, safe for concurrent use.
type Execution struct {
	turn   *upstream.Turn
	meter  *budget.Meter
	blobs  outputs.BlobStore
	tenant string
	log    *slog.Logger
	report telemetry.Reporter
	slots  chan struct{} // one per call in flight
	appr   *approval.Asking
	// questions are the execution's questions: one open at a time, their decisions counted.
	questions approval.Questions

	mu      sync.Mutex // guards handles
	handles map[outputs.Handle]bool

	finishing sync.WaitGroup // tool_call_finished records being written
	ending    atomic.Bool    // Wait has begun: a record still to write is committed at once

	received atomic.Int64 // bytes of the values the program received

	tape Tape
	seq  atomic.Int64 // the calls numbered so far, for the tape
	// calls are the program's calls as its result's tool_calls say them.
	calls callLog

	rehearsal *rehearsal // nil unless Options.Rehearse
	reach     map[string]bool

	nested     Nested
	nestedSigs map[string]toolshape.Signature
}

// New returns the binding state of one execution.
func New(opts *Options) *Execution {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Turn == nil {
		o.Turn = upstream.EmptyTurn()
	}
	if o.MaxConcurrentCalls <= 0 {
		o.MaxConcurrentCalls = DefaultMaxConcurrentCalls
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	x := &Execution{turn: o.Turn, meter: o.Meter, blobs: o.Blobs, tenant: o.Tenant, log: o.Logger, appr: o.Approvals, report: o.Report, tape: o.Tape,
		slots: make(chan struct{}, o.MaxConcurrentCalls), handles: map[outputs.Handle]bool{}}
	if o.Rehearse {
		x.rehearsal = &rehearsal{}
	}
	if o.Nested != nil {
		x.nested, x.nestedSigs = o.Nested, signatures(o.Nested)
	}
	if o.Reach != nil {
		x.reach = map[string]bool{}
		for _, n := range o.Reach {
			x.reach[n] = true
		}
	}
	return x
}

// Names returns the sorted names the program may call: its TOOLS (and a tape's, and its saved
// programs').
func (x *Execution) Names() []string {
	if x.tape == nil && x.nested == nil {
		return x.turn.Names()
	}
	names := append(x.turn.Names(), x.nestedNames()...)
	if x.tape != nil {
		names = append(names, x.tape.Tools()...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// Aliases returns the names of Names bound as Python names too (toolshape.Aliasable): computed
// here once and handed to the engine in its Execution.
func (x *Execution) Aliases() []string {
	if x.tape == nil && x.nested == nil {
		return x.turn.Aliases()
	}
	var out []string
	for _, n := range x.Names() {
		if toolshape.Aliasable(n) {
			out = append(out, n)
		}
	}
	return out
}

// Signatures returns, as JSON, the keywords each of Names' bindings takes
// (upstream.Turn.Signatures): handed to the engine, so the program refuses other keywords
// before it sends a call.
func (x *Execution) Signatures() json.RawMessage {
	sigs := x.turn.Signatures()
	maps.Copy(sigs, x.nestedSigs)
	b, err := json.Marshal(sigs)
	if err != nil {
		return nil
	}
	return b
}

// Unavailable returns the bindings that resolve to no callable tool: unavailable_bindings.
func (x *Execution) Unavailable() []string { return x.turn.Unavailable() }

// Approvals returns the approval step's decisions so far: the result's approvals.
func (x *Execution) Approvals() approval.Counts { return x.questions.Counts() }

// Problems maps each granted server with something wrong with its tools (one that could not
// be started, and why) to a sentence safe to show the model: upstream_problems.
func (x *Execution) Problems() map[string]string { return x.turn.Problems() }

// Wait waits for the tool_call_finished records still being written, committing those the
// ledger holds queued. Call it once the program can make no more calls (Sandbox.Run
// returned) and before the meters are read or the execution is ended.
func (x *Execution) Wait() {
	x.ending.Store(true)
	if x.meter != nil {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := x.meter.Flush(ctx); err != nil {
			x.log.Error("tool_call_finished records not committed", "err", err)
		}
	}
	x.finishing.Wait()
}

// waitTimeout bounds Wait's commit of the queued records.
const waitTimeout = 10 * time.Second

// ReceivedBytes is what the program has received from its calls and handle reads: the bytes
// of every value (a handle as the JSON that crosses for it), the binding_bytes of run_code's
// context report.
func (x *Execution) ReceivedBytes() int64 { return x.received.Load() }

// delivered counts what a reply hands the program.
func (x *Execution) delivered(r toolcall.Answer) toolcall.Answer {
	switch {
	case r.Kind != "":
	case r.Handle != nil:
		x.received.Add(int64(len(handleJSON(r.Handle))))
	default:
		x.received.Add(int64(len(r.Value)))
	}
	return r
}

// CallTool is one binding call from the program, top to bottom (walk), traced, counted and
// noted in the execution's tool_calls (ToolCalls).
func (x *Execution) CallTool(ctx context.Context, name string, args json.RawMessage) toolcall.Answer {
	ctx, ob := x.observe(ctx, name)
	seq := int(x.seq.Add(1))
	tapeSeq := 0 // the call's number on the tape, which a question carries; 0 without one
	if x.tape != nil {
		tapeSeq = seq
		if a, ok := x.tape.Play(seq, name, args); ok {
			if a.Handle != nil {
				// A played handle is this execution's: handle.read() reads it from the blob
				// store the player gave (execution.Options.Blobs), or, for a resumed program's,
				// where its first run kept it.
				x.mu.Lock()
				x.handles[outputs.Handle(a.Handle.ID)] = true
				x.mu.Unlock()
			}
			rep := x.delivered(a)
			ob.end(rep)
			x.calls.played(seq, name, rep)
			return rep
		}
	}
	note := x.calls.begin(seq, name)
	rep := x.delivered(x.walk(ctx, tapeSeq, name, args, note))
	d := note.decision // the walk is over: nothing writes the note now
	ob.end(rep)
	x.calls.end(note, rep)
	if x.tape == nil {
		return rep
	}
	c := TapedCall{Seq: seq, Name: name, Args: args, Answer: rep, Approval: d, Seconds: time.Since(ob.start).Seconds()}
	if tool, fe := x.turn.Lookup(name); fe == nil {
		c.Tool = tool
	}
	if rep.Handle != nil && x.blobs != nil {
		c.Kept, c.Cut = x.keptBytes(ctx, outputs.Handle(rep.Handle.ID), x.tape.KeptBytes())
	}
	x.tape.Record(c)
	return rep
}

// keptBytes reads the first n bytes of a result kept under h, for the tape; cut says there
// were more. A tape that keeps none (n 0: a journal, a player) costs no read.
func (x *Execution) keptBytes(ctx context.Context, h outputs.Handle, n int64) (kept []byte, cut bool) {
	if n <= 0 {
		return nil, true
	}
	b, err := x.blobs.Open(context.WithoutCancel(ctx), x.tenant, h)
	if err != nil {
		x.log.Warn("a kept result not read for the cassette", "handle", h, "err", err)
		return nil, false
	}
	defer b.Close()
	kept, err = io.ReadAll(io.LimitReader(b, n+1))
	if err != nil {
		x.log.Warn("a kept result not read for the cassette", "handle", h, "err", err)
	}
	if int64(len(kept)) > n {
		return kept[:n], true
	}
	return kept, false
}

// walk takes the hops of one binding call; docs/design.md §12.2 walks it.
// What the call came to before its answer (its approval, whether it was spent) is left in
// note; seq is the call's number on
// the tape (0 without one), which a question carries.
func (x *Execution) walk(ctx context.Context, seq int, name string, args json.RawMessage, note *callNote) toolcall.Answer {
	// 1. Built-ins are served here, or refused with the reason.
	if r, ok := x.builtin(ctx, name, args); ok {
		return r
	}
	// A saved program is its own execution, whose calls take these hops themselves.
	if r, ok := x.callNested(ctx, name, args); ok {
		return r
	}
	// 2. Policy: a tool of a granted server that no deny glob matches.
	tool, fe := x.turn.Lookup(name)
	if fe != nil {
		return toolcall.Refused(fe)
	}
	// 3. Bindings: the agent's list narrows what its programs may call.
	if !x.turn.Bound(tool) {
		return refuse(failure.Unavailable, "%s is not among this agent's bindings", name)
	}
	if x.reach != nil && !x.reach[tool.Name] {
		return refuse(failure.Unavailable, "%s is not among the tools this saved program names, which are all it may call", name)
	}
	// 4. Arguments: a JSON object of exactly the keywords the binding takes (its stub's), matching
	// the tool's input schema.
	checked, fe := tool.BindingArguments(args)
	if fe != nil {
		if x.meter != nil {
			fe = x.meter.Refuse(ctx, budget.Call{Tool: tool.Name, ArgumentBytes: int64(len(args))}, fe)
		}
		return toolcall.Refused(fe)
	}
	args = checked
	// A rehearsal lists a call that would change something instead of making it (rehearse.go).
	if x.rehearsal != nil && !upstream.ReadOnlyTool(tool) {
		return x.rehearse(ctx, tool, args)
	}
	// The id the call's record takes if it is admitted, noted first: a note of the calls taken
	// while it waits for its approval or a slot, or is being admitted, relates it to its record.
	id := ""
	if x.meter != nil {
		id = budget.NewID("c_")
	}
	note.numbered(id)
	// 5. Approval: argument rules, then, when the call needs it, a person's answer, while the
	// program waits on its channel.
	var by string
	d, callID, fe := approve(ctx, x.appr, x.turn, tool, args, x.meter, x.log, &x.questions, seq, &by, id)
	note.approved(d, by)
	if fe != nil {
		return toolcall.Refused(fe)
	}
	// 6. A call slot: at most MaxConcurrentCalls in flight. A call waits here, before it is
	// spent, so one that never gets a slot costs nothing.
	release, fe := x.slot(ctx, tool.Name)
	if fe != nil {
		return toolcall.Refused(fe)
	}
	defer release()
	// 7. Admission: tool_call_started is written, and the call is spent whatever follows.
	tk, fe := admit(ctx, x.meter, callID, tool.Name, args)
	if fe != nil {
		return toolcall.Refused(fe)
	}
	note.made()
	// 8. The upstream call.
	a, spent := x.turn.Invoke(ctx, tool, args)
	// 9. Delivery: whole within the transfer allowance, else kept in the blob store and handed
	// over as a handle.
	rep, o := x.deliver(ctx, tk, tool, a, spent)
	// 10. tool_call_finished, written while the reply travels on to the program; first, when
	// the ledger's hold on the call may have lapsed, so a result is handed over only for a
	// call still recorded started.
	if tk != nil && !tk.SurelyOpen() {
		return x.finishFirst(ctx, tk, tool, rep, o, note)
	}
	x.finish(ctx, tk, o)
	return rep
}

// finishFirst writes tool_call_finished before the reply goes: a call a survivor recorded
// unknown while it ran (this process stalled past its ledger lease) has its result withheld,
// since the ledger holds it as never answered; the bytes that arrived are charged all the
// same (budget.Ticket.Finish).
func (x *Execution) finishFirst(ctx context.Context, tk *budget.Ticket, tool *upstream.Tool, rep toolcall.Answer, o budget.CallFinish, note *callNote) toolcall.Answer {
	err := tk.Finish(context.WithoutCancel(ctx), o)
	if err == nil {
		return rep
	}
	if !errors.Is(err, budget.ErrAlreadyFinished) {
		x.log.Error("tool_call_finished not recorded", "call", tk.ID(), "err", err)
		return rep
	}
	x.log.Warn("a call's result withheld: the ledger recorded it unknown while it ran", "call", tk.ID(), "tool", tool.Name, "err", err)
	note.withholding()
	if rep.Handle != nil {
		x.mu.Lock()
		delete(x.handles, outputs.Handle(rep.Handle.ID))
		x.mu.Unlock()
	}
	return toolcall.Answer{Kind: failure.UpstreamError, Message: fmt.Sprintf("the call of %s was recorded as of unknown outcome while it ran "+
		"(this server lost its hold on the ledger for a while), so its result is withheld; it was made and is counted", tool.Name)}
}

func refuse(k failure.Kind, format string, args ...any) toolcall.Answer {
	return toolcall.Answer{Kind: k, Message: fmt.Sprintf(format, args...)}
}

// slot takes one of the execution's call slots; release gives it back. Waiting ends with ctx,
// and the call is then cancelled (or timed out) without being made.
func (x *Execution) slot(ctx context.Context, name string) (release func(), _ *failure.Error) {
	select {
	case x.slots <- struct{}{}:
		return func() { <-x.slots }, nil
	case <-ctx.Done():
		if ctx.Err() == context.DeadlineExceeded {
			return nil, failure.New(failure.Timeout, "%s was not called: the time ran out while waiting for a free call slot", name)
		}
		return nil, failure.New(failure.Cancelled, "%s was not called: cancelled while waiting for a free call slot", name)
	}
}

// admit writes tool_call_started through meter (nil: nothing is metered, tk is nil). A refusal
// was recorded as refused and never spent. A ledger failure (internal) reaches the program as
// upstream_error, because ToolError's kinds are failure.CallKinds and nothing else; the call was
// not made.
func admit(ctx context.Context, meter *budget.Meter, id, name string, args json.RawMessage) (*budget.Ticket, *failure.Error) {
	if meter == nil {
		return nil, nil
	}
	tk, fe := meter.Admit(ctx, budget.Call{ID: id, Tool: name, ArgumentBytes: int64(len(args))})
	if fe != nil && !fe.Kind.CallKind() {
		fe = &failure.Error{Kind: failure.UpstreamError, Message: fe.Message, Err: fe.Err}
	}
	return tk, fe
}

// outcome is what tool_call_finished records of an answer that is not a value: failed, or
// aborted when cancelled. The transfer is filled in by delivery.
func outcome(a toolcall.Answer, spent upstream.Spent) budget.CallFinish {
	o := budget.CallFinish{Status: budget.Succeeded, Usage: budget.Usage{ProducedBytes: int64(spent.Size)}}
	if a.Kind != "" {
		o.Status, o.Kind, o.Message = budget.Failed, string(a.Kind), a.Message
		if a.Kind == failure.Cancelled {
			o.Status = budget.Aborted
		}
	}
	return o
}

// finish writes tool_call_finished on its own goroutine: the call was spent when it started,
// and a crash before this lands is recorded unknown. The record may lag (Ticket.FinishLater):
// a ledger that batches commits it with the next call's tool_call_started, one transaction
// for both. Wait waits for every finish.
func (x *Execution) finish(ctx context.Context, tk *budget.Ticket, o budget.CallFinish) {
	if tk == nil {
		return
	}
	tk.Answered(o)
	x.finishing.Add(1)
	go func() {
		defer x.finishing.Done()
		finish := tk.FinishLater // committed with the next call's tool_call_started
		if x.ending.Load() {
			finish = tk.Finish
		}
		if err := finish(context.WithoutCancel(ctx), o); err != nil {
			x.log.Error("tool_call_finished not recorded", "call", tk.ID(), "err", err)
		}
	}()
}

// Direct makes a host's direct call of an exposed tool: the same policy, arguments and approval
// as a program's call (appr asks the person; nil asks nobody), without bindings (an agent's
// program setting); recorded under meter (budget.Direct; nil records nothing), outside the
// binding budget, and never paged: the host gets the whole value. DirectKept is the call that
// keeps a large result under a handle instead.
func Direct(ctx context.Context, turn *upstream.Turn, meter *budget.Meter, appr *approval.Asking, log *slog.Logger, name string, args json.RawMessage) toolcall.Answer {
	return DirectKept(ctx, turn, meter, appr, log, name, args, Keep{}).Answer
}

// Keep says where a direct call's large result goes: a value whose kept form (HandleContent)
// is over PreviewBytes is put in Blobs under Tenant, and the host gets a head-and-tail preview
// and the handle, as a program would (docs/design.md §6). Blobs nil keeps nothing: the host
// gets the whole value.
type Keep struct {
	Blobs        outputs.BlobStore
	Tenant       string
	PreviewBytes int
}

// DirectAnswer is a direct call's answer: Answer's Value whole, or, when the result was kept,
// Answer.Handle with Preview (of the kept content, at most Keep.PreviewBytes) and ContentType;
// Size is the bytes the upstream's value weighed.
type DirectAnswer struct {
	toolcall.Answer
	Preview     string
	ContentType string
	Size        int64
}

// DirectKept is Direct with large results kept under a handle (keep): the handle is recorded
// with tool_call_finished (attachments, preserved bytes) and the transfer is what the host
// received, the preview and the handle. A result the store cannot keep is handed over whole,
// with a warning logged: the host asked for it, and the value exists.
func DirectKept(ctx context.Context, turn *upstream.Turn, meter *budget.Meter, appr *approval.Asking, log *slog.Logger, name string, args json.RawMessage, keep Keep) DirectAnswer {
	tool, fe := turn.Lookup(name)
	if fe != nil {
		return DirectAnswer{Answer: toolcall.Refused(fe)}
	}
	args, fe = tool.Arguments(args)
	if fe != nil {
		return DirectAnswer{Answer: toolcall.Refused(fe)}
	}
	_, callID, fe := approve(ctx, appr, turn, tool, args, meter, log, nil, 0, nil, "")
	if fe != nil {
		return DirectAnswer{Answer: toolcall.Refused(fe)}
	}
	tk, fe := admit(ctx, meter, callID, tool.Name, args)
	if fe != nil {
		return DirectAnswer{Answer: toolcall.Refused(fe)}
	}
	a, spent := turn.Invoke(ctx, tool, args)
	o := outcome(a, spent)
	r := DirectAnswer{Answer: a, Size: int64(len(a.Value))}
	if a.Kind == "" {
		o.Usage.TransferBytes = int64(len(a.Value))
		if k, ok := keepDirect(ctx, keep, tool, a.Value, log); ok {
			k.Size = r.Size
			r = k
			o.Usage.TransferBytes = int64(len(r.Preview) + len(handleJSON(r.Handle)))
			o.Usage.PreservedBytes = r.Handle.Size
			o.Attachments, _ = json.Marshal([]outputs.Attachment{{Name: tool.Name, Handle: r.Handle.ID, ContentType: r.ContentType,
				Size: r.Handle.Size, Truncated: true, Location: "blob"}})
		}
	}
	if tk != nil {
		if err := tk.Finish(ctx, o); err != nil {
			log.Error("tool_call_finished not recorded", "call", tk.ID(), "err", err)
		}
	}
	return r
}

// keepDirect puts v's kept form in keep.Blobs when it is over keep.PreviewBytes; ok is false
// when it is not, or cannot be, kept.
func keepDirect(ctx context.Context, keep Keep, tool *upstream.Tool, v json.RawMessage, log *slog.Logger) (DirectAnswer, bool) {
	if keep.Blobs == nil || keep.PreviewBytes <= 0 || len(v) <= keep.PreviewBytes {
		return DirectAnswer{}, false
	}
	content, ctype := HandleContent(v)
	if len(content) <= keep.PreviewBytes {
		return DirectAnswer{}, false
	}
	h, n, err := keep.Blobs.Put(ctx, keep.Tenant, tool.Name, ctype, bytes.NewReader(content), int64(len(content)))
	if err != nil {
		log.Warn("direct call result not kept under a handle; handed over whole", "tool", tool.Name, "bytes", len(content), "err", err)
		return DirectAnswer{}, false
	}
	return DirectAnswer{Answer: toolcall.Answer{Handle: &toolcall.Handle{ID: string(h), Size: n, Lines: lineCount(content)}},
		Preview: outputs.Preview(content, content, int64(len(content)), keep.PreviewBytes), ContentType: ctype}, true
}
