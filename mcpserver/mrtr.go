package mcpserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/approval"
	"github.com/mcp-sandbox/mcp-sandbox/binding"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/cassette"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
)

// Approvals for clients of revision 2026-07-28 and later (multi round-trip requests, SEP-2322).
// Such a client cannot be sent elicitation/create; instead the tools/call is answered with
// resultType input_required, the question as an elicitation input request and a sealed
// requestState (sealed.go), and the client retries the same call with the person's answer.
//
// The call itself does not start again on the retry: it is held. A run_code's program, or a
// direct call, runs on a hold whose context outlives the request, and the hold is the Asker of
// its questions (package approval): it shows the question it is asked to the request waiting
// on it, until the Room withdraws it. The request that started it, and each retry, waits on
// the hold until the call ends (its result is the answer) or asks a question (input_required).
// A retry (retry.go) opens its state, checks that it is this tenant's, agent's and Run's, the
// same call and not expired, and hands the answer to the Room, which records it as the
// question's pause's (the first answer from any path stands) and wakes the call waiting on it;
// anything else is refused with the reason and changes nothing. A question is answered once:
// a replayed state finds its pause answered, so an accepted call is never made twice.
//
// Clients of 2025-11-25 and earlier keep elicitation/create in place (approvals.go): go-sdk's
// own bridge (which would fulfil input requests with Elicit and re-invoke the handler once)
// would serve one question per call and none past the first, where a program may ask several.

// hold is one call held across round trips, and the approval.Asker of its questions: what it
// is asked is shown to the request waiting on it as input_required.
type hold struct {
	id   string
	base pendingState // tenant, agent, Run, hold and call, as every state of this hold carries
	// cancel ends the call's context: the request waiting on it was cancelled, or another
	// process carries the call on.
	cancel context.CancelFunc
	done   chan struct{}
	res    *mcp.CallToolResult // set before done closes
	// relay is told of a question of this hold answered on another path (an operator, a retry
	// that reached another process): what the call comes to next is relayed for its retry.
	relay func(hd *hold, question string)

	// prog sends a program's progress to the request waiting on the hold, if it asked for
	// progress; nil between round trips, when nobody listens.
	prog atomic.Pointer[progress]

	mu sync.Mutex // guards the fields below
	// asking is the question put to the client now. There is one at most: an execution's
	// questions take turns (approval.Questions), and a second waits for the first to go.
	asking *approval.Question
	// collect is the last question answered on another path: a retry of it collects what the
	// call comes to, and the ended hold is kept for it until keep.
	collect string
	keep    time.Time
	// changed is closed, and replaced, when asking changes or the call ends.
	changed chan struct{}
}

func newHold(base pendingState, relay func(*hold, string)) *hold {
	return &hold{id: base.Hold, base: base, done: make(chan struct{}), changed: make(chan struct{}), relay: relay}
}

// report is the held program's progress callback.
func (hd *hold) report(elapsed float64, stdout *outputs.Capture) {
	if p := hd.prog.Load(); p != nil {
		p.report(elapsed, stdout)
	}
}

// changedLocked tells whoever waits on hd that it changed; hd.mu is held.
func (hd *hold) changedLocked() {
	close(hd.changed)
	hd.changed = make(chan struct{})
}

// end records the call's result and tells whoever waits.
func (hd *hold) end(res *mcp.CallToolResult) {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	hd.res = res
	close(hd.done)
	hd.changedLocked()
}

func (hd *hold) CanAsk() (bool, string) { return true, "" }

// Ask shows q to the request waiting on hd until the Room withdraws it (ctx ends); the answer
// comes back by a retry, which hands it to the Room. Withdrawn as answered on another path, q
// is collected by its retries and its call's outcome relayed; withdrawn because another
// process carries the call on, the call stops here.
func (hd *hold) Ask(ctx context.Context, q approval.Question) (approval.Answer, error) {
	hd.mu.Lock()
	for hd.asking != nil {
		changed := hd.changed
		hd.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return approval.Answer{}, ctx.Err()
		}
		hd.mu.Lock()
	}
	hd.asking = &q
	hd.changedLocked()
	hd.mu.Unlock()
	<-ctx.Done()
	cause := context.Cause(ctx)
	hd.mu.Lock()
	if hd.asking == &q {
		hd.asking = nil
	}
	if errors.Is(cause, approval.ErrAnsweredElsewhere) {
		hd.collect = q.ID
		if q.Expires.After(hd.keep) {
			hd.keep = q.Expires
		}
	}
	hd.changedLocked()
	hd.mu.Unlock()
	switch {
	case errors.Is(cause, approval.ErrAnsweredElsewhere):
		hd.relay(hd, q.ID)
	case errors.Is(cause, approval.ErrClaimedElsewhere):
		hd.cancel()
	}
	return approval.Answer{}, ctx.Err()
}

// asks reports whether question id is put to the client now.
func (hd *hold) asks(id string) bool {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	return hd.asking != nil && hd.asking.ID == id
}

// collects reports whether a retry of question id collects what the call comes to: it was
// answered on another path.
func (hd *hold) collects(id string) bool {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	return hd.collect == id
}

// next is the input_required of the question hd asks now, sealed under keys, or hd's result
// once its call ended; otherwise nil and what hd's next change closes.
func (hd *hold) next(keys *StateKeys) (*mcp.CallToolResult, <-chan struct{}) {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	if q := hd.asking; q != nil {
		st := hd.base
		st.Questions, st.Expires = []string{q.ID}, q.Expires.UnixMilli()
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{q.ID: &mcp.ElicitParams{Mode: "form", Message: q.Message(), RequestedSchema: approvalSchema}},
			RequestState:  keys.seal(st),
		}, nil
	}
	select {
	case <-hd.done:
		return resultCopy(hd.res), nil
	default:
	}
	return nil, hd.changed
}

// resultCopy is a copy of res that a request may hand to go-sdk, which writes into the
// result it sends (its type, its _meta): several requests, and a relay, may take a held
// call's one result.
func resultCopy(res *mcp.CallToolResult) *mcp.CallToolResult {
	if res == nil {
		return nil
	}
	c := *res
	c.Meta = maps.Clone(res.Meta)
	return &c
}

// outcome waits for what hd comes to next (next), or nil when ctx ends first.
func (hd *hold) outcome(ctx context.Context, keys *StateKeys) *mcp.CallToolResult {
	for {
		res, changed := hd.next(keys)
		if res != nil {
			return res
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil
		}
	}
}

// holds are a server's held calls: those still running, and those ended that are kept for a
// retry of a question answered on another path to collect (hold.keep).
type holds struct {
	mu   sync.Mutex
	byID map[string]*hold
}

func (hs *holds) add(hd *hold) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.byID == nil {
		hs.byID = map[string]*hold{}
	}
	hs.byID[hd.id] = hd
}

func (hs *holds) get(id string) *hold {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.byID[id]
}

// finished forgets an ended hold, at once unless a question of it was answered on another path:
// then once that question would have expired.
func (hs *holds) finished(hd *hold) {
	hd.mu.Lock()
	keep := time.Until(hd.keep)
	hd.mu.Unlock()
	if keep > 0 {
		time.AfterFunc(keep, func() { hs.forget(hd) })
		return
	}
	hs.forget(hd)
}

func (hs *holds) forget(hd *hold) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	delete(hs.byID, hd.id)
}

// asksByInput reports whether req's client is asked through input requests: it speaks
// revision 2026-07-28 or later and declared form elicitation.
func asksByInput(req *mcp.CallToolRequest) bool {
	if req == nil || req.Session == nil || !sessionlessRequest(req) {
		return false
	}
	ok, _ := elicitationDeclared(req.Session.InitializeParams())
	return ok
}

// sessionlessRequest: req is of revision 2026-07-28 or later (over HTTP its header says so;
// over stdio the revision its _meta named).
func sessionlessRequest(req *mcp.CallToolRequest) bool {
	if req.Extra != nil && req.Extra.Header != nil && strings.TrimSpace(req.Extra.Header.Get(headerProtocolVersion)) >= revisionStateless {
		return true
	}
	ip := req.Session.InitializeParams()
	return ip != nil && ip.ProtocolVersion >= revisionStateless
}

// callEnv is how one tools/call runs: how its questions are asked (asking), the program's tape
// its pauses keep (journal; nil for a call whose host cannot be asked), and, for a held call,
// where a program's progress goes (progress; nil: to the request's own progress token).
type callEnv struct {
	asking   *approval.Asking
	journal  *cassette.Journal
	progress func(elapsedSeconds float64, stdout *outputs.Capture)
	// started is told the execution's id (execution.Program.Started): a task's.
	started func(executionID string)
	// calls is handed the execution's bindings (execution.Program.Calls): a task's.
	calls func(x *binding.Execution)
	// ran is told the program stopped, before its outputs are kept (execution.Program.Ran): a
	// task's.
	ran func()
	// run is the Run the program runs in; zero: the request's (runOf). A task's is fixed when
	// the task is created: its request's throwaway session may end before the program starts,
	// and runOf would then give a new Run, not the task's.
	run budget.RunRef
}

// runIn is the Run a program of req runs in, as env says.
func (h *handlers) runIn(req *mcp.CallToolRequest, env callEnv) budget.RunRef {
	if env.run.ID != "" {
		return env.run
	}
	return h.runOf(req)
}

// heldOp is a call that may be held.
type heldOp func(ctx context.Context, env callEnv) *mcp.CallToolResult

// serveCall runs op for req: in the handler, asking by elicitation/create or not at all, as
// for every client before 2026-07-28; on a hold, for a client asked through input requests;
// and a retry carrying a requestState continues the call it names (retry.go).
func (h *handlers) serveCall(ctx context.Context, req *mcp.CallToolRequest, op heldOp) *mcp.CallToolResult {
	if req.Params.RequestState != "" || len(req.Params.InputResponses) > 0 {
		return h.retry(ctx, req, op)
	}
	if !asksByInput(req) {
		env := callEnv{asking: h.asking(req, elicitationOf(req), "")}
		if ok, _ := env.asking.Asker.CanAsk(); ok {
			env.journal = cassette.NewJournal()
			env.asking.Journal = env.journal
		}
		return op(ctx, env)
	}
	return h.startHold(ctx, req, op, cassette.NewJournal(), nil)
}

// startHold runs op on a new hold and waits on it for req. j is the program's journal (for a
// program run again after its pause, the journal it is answered from up to the pause), and
// standing the answer of the call it paused on.
func (h *handlers) startHold(ctx context.Context, req *mcp.CallToolRequest, op heldOp, j *cassette.Journal, standing approval.Standing) *mcp.CallToolResult {
	id := budget.NewID("h_")
	hd := newHold(pendingState{Tenant: h.agent.Tenant, Agent: h.agent.Name, Run: h.runKey(req), Hold: id, Call: callDigest(req)}, h.relayOutcome)
	env := callEnv{asking: h.asking(req, hd, id), journal: j, progress: hd.report}
	env.asking.Journal, env.asking.Standing = j, approval.Standings(standing, env.asking.Standing)
	// The hold outlives the request; a Drain cancels it and waits for it like an execution.
	hctx, end, ok := h.opts.Drain.begin(context.WithoutCancel(ctx))
	if !ok {
		return toolError("the server is shutting down; nothing ran")
	}
	hctx, cancel := context.WithCancel(hctx)
	hd.cancel = cancel
	h.holds.add(hd)
	go func() {
		defer end()
		defer cancel()
		res := op(hctx, env)
		h.holds.finished(hd)
		hd.end(res)
	}()
	return h.await(ctx, req, hd)
}

// await waits on hd for the request ctx: the call's result when it ends, or input_required
// when it asks. A request cancelled while it waits cancels the call, as it would in place.
func (h *handlers) await(ctx context.Context, req *mcp.CallToolRequest, hd *hold) *mcp.CallToolResult {
	if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
		pr := newProgress(ctx, req.Session, tok)
		hd.prog.Store(pr)
		defer func() {
			hd.prog.CompareAndSwap(pr, nil)
			pr.wait()
		}()
	}
	if res := hd.outcome(ctx, h.stateKeys); res != nil {
		return res
	}
	hd.cancel()
	<-hd.done
	return resultCopy(hd.res)
}

// runKey is the Run a held call is bound to: a named Run, a session's, or "" for a sessionless
// request that is its own Run (the retry is another request).
func (h *handlers) runKey(req *mcp.CallToolRequest) string {
	if v, ok := req.Params.Meta[MetaRun].(string); ok {
		return "named:" + v
	}
	if req.Session == nil {
		return ""
	}
	if sid := req.Session.ID(); sid != "" {
		return "session:" + sid
	}
	if req.Extra != nil && req.Extra.Header != nil && req.Extra.Header.Get(headerProtocolVersion) >= revisionStateless {
		return "" // a throwaway session of the stateless handler
	}
	return h.runOf(req).ID // a stdio session's own Run
}

// callDigest names the call a state continues: the tool and its arguments, canonical JSON.
func callDigest(req *mcp.CallToolRequest) string {
	args := bytes.TrimSpace(req.Params.Arguments)
	var v any
	if json.Unmarshal(args, &v) == nil {
		args, _ = json.Marshal(v)
	}
	sum := sha256.Sum256(append([]byte(req.Params.Name+"\x00"), args...))
	return hex.EncodeToString(sum[:16])
}
