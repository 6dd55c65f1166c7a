package mcpserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/binding"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/cassette"
)

// Approvals for clients of revision 2026-07-28 and later (multi round-trip requests, SEP-2322).
// Such a client cannot be sent elicitation/create; instead the tools/call is answered with
// resultType input_required, the question as an elicitation input request and a sealed
// requestState (sealed.go), and the client retries the same call with the person's answer.
//
// The call itself does not start again on the retry: it is held. A run_code's program, or a
// direct call, runs on a hold whose context outlives the request, and its approval step asks
// through holdAsker, which parks the question on the hold and waits in place, exactly as it
// waits for elicitation/create (the child holds on its channel, its wall clock runs, the
// profile's approvals.timeout_seconds bounds the wait). The request that started it, and each
// retry, waits on the hold until the call ends (its result is the answer) or asks a question
// (input_required). A retry opens its state, checks that it is this tenant's, agent's and Run's,
// the same call, not yet answered and not expired, and hands the answer to the waiting step;
// anything else is refused with the reason and changes nothing. A question is answered once: a
// replayed state finds it answered, so an accepted call is never made twice.
//
// A hold lives in the process that started it: a retry reaching another process, or this one
// after a restart, finds no hold and is refused (the ledger records the approval unknown).
//
// Clients of 2025-11-25 and earlier keep elicitation/create in place (sessionAsker): go-sdk's
// own bridge (which would fulfil input requests with Elicit and re-invoke the handler once)
// would serve one question per call and none past the first, where a program may ask several.

// hold is one call held across round trips.
type hold struct {
	id   string
	base pendingState // tenant, agent, Run, hold and call, as every state of this hold carries
	// cancel ends the call's context: the request waiting on it was cancelled.
	cancel context.CancelFunc
	done   chan struct{}
	res    *mcp.CallToolResult // set before done closes

	// wake receives (without blocking the sender) when a question is added.
	wake chan struct{}
	// prog sends a program's progress to the request waiting on the hold, if it asked for
	// progress; nil between round trips, when nobody listens.
	prog atomic.Pointer[progress]
	// mu guards open: the questions asked and not yet answered or withdrawn.
	mu   sync.Mutex
	open []*question
	// released are the expiries of the questions an operator answered (holds.mu guards it).
	released []time.Time
}

// report is the held program's progress callback.
func (hd *hold) report(elapsed float64) {
	if p := hd.prog.Load(); p != nil {
		p.report(elapsed)
	}
}

// question is one approval question parked on a hold.
type question struct {
	id      string
	q       binding.Question
	expires time.Time
	answer  chan binding.Answer // buffered: delivery never blocks
}

// holds are a server's held calls and recently answered questions.
type holds struct {
	mu sync.Mutex
	// byID are the held calls still running, and those an operator released, kept ended
	// until their last question would have expired, for the client's retry to collect.
	byID map[string]*hold
	// answered are the questions answered, until their state expires (after which an expired
	// state is refused as expired anyway).
	answered map[string]time.Time
	// elsewhere are the questions an operator answered (pause.go), until they would have
	// expired: a retry of one waits on its hold rather than answering it.
	elsewhere map[string]time.Time
}

// init makes hs's maps on first use; hs.mu is held.
func (hs *holds) init() {
	if hs.byID == nil {
		hs.byID, hs.answered, hs.elsewhere = map[string]*hold{}, map[string]time.Time{}, map[string]time.Time{}
	}
}

func (hs *holds) add(hd *hold) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.init()
	hs.byID[hd.id] = hd
}

// markAnswered records that question id was answered, until its state expires.
func (hs *holds) markAnswered(id string, expires time.Time) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.init()
	hs.answered[id] = expires
}

// finished forgets an ended hold, at once unless an operator answered one of its questions:
// then when that question would have expired.
func (hs *holds) finished(hd *hold) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	var keep time.Time
	for _, exp := range hd.released {
		if exp.After(keep) {
			keep = exp
		}
	}
	if d := time.Until(keep); d > 0 {
		time.AfterFunc(d, func() { hs.forget(hd) })
		return
	}
	delete(hs.byID, hd.id)
}

func (hs *holds) forget(hd *hold) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	delete(hs.byID, hd.id)
	for id, exp := range hs.elsewhere {
		if time.Now().After(exp) {
			delete(hs.elsewhere, id)
		}
	}
}

// releasedElsewhere records that an operator answered question id of hd.
func (hs *holds) releasedElsewhere(hd *hold, id string, expires time.Time) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.init()
	hs.elsewhere[id] = expires
	hd.released = append(hd.released, expires)
}

// decidedElsewhere reports whether an operator answered any of the questions ids; hs.mu is
// held.
func (hs *holds) decidedElsewhere(ids []string) bool {
	for _, id := range ids {
		if _, ok := hs.elsewhere[id]; ok {
			return true
		}
	}
	return false
}

// holdAsker is the Asker of a held call: it parks each question on the hold, for the request
// waiting on it to put to the client, and waits for the answer a retry brings.
type holdAsker struct{ hd *hold }

func (a holdAsker) CanAsk() (bool, string) { return true, "" }

func (a holdAsker) Ask(ctx context.Context, q binding.Question) (binding.Answer, error) {
	return a.askAs(ctx, budget.NewID("q_"), q)
}

// expiry is when a question waiting wait under ctx closes: after wait, or at ctx's deadline
// when that comes first.
func expiry(ctx context.Context, wait time.Duration) time.Time {
	expires := time.Now().Add(wait)
	if dl, ok := ctx.Deadline(); ok && dl.Before(expires) {
		return dl
	}
	return expires
}

// askAs asks q as the input request named id.
func (a holdAsker) askAs(ctx context.Context, id string, q binding.Question) (binding.Answer, error) {
	qu := &question{id: id, q: q, expires: expiry(ctx, q.Wait), answer: make(chan binding.Answer, 1)}
	a.hd.mu.Lock()
	a.hd.open = append(a.hd.open, qu)
	a.hd.mu.Unlock()
	select {
	case a.hd.wake <- struct{}{}:
	default:
	}
	select {
	case ans := <-qu.answer:
		return ans, nil
	case <-ctx.Done():
	}
	a.hd.mu.Lock()
	for i, o := range a.hd.open {
		if o == qu {
			a.hd.open = append(a.hd.open[:i], a.hd.open[i+1:]...)
			break
		}
	}
	a.hd.mu.Unlock()
	select {
	case ans := <-qu.answer: // delivered before it was withdrawn
		return ans, nil
	default:
		return binding.Answer{}, ctx.Err()
	}
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

// heldOp is a call that may be held: it runs with a.Asker asking the person. j, when not nil,
// is the tape of a program's calls (pause.go): the journal its pauses keep, and, for a
// program resumed after its holder was gone, the journal it is answered from up to its pause.
type heldOp func(ctx context.Context, a *binding.Approvals, j *cassette.Journal) *mcp.CallToolResult

// serveCall runs op for req: in the handler, asking by elicitation/create or not at all, as
// for every client before 2026-07-28; on a hold, for a client asked through input requests;
// and a retry carrying a requestState continues the hold it names, or, when no process holds
// it any more, the pause the ledger kept of it (pause.go).
func (h *handlers) serveCall(ctx context.Context, req *mcp.CallToolRequest, op heldOp) *mcp.CallToolResult {
	if req.Params.RequestState != "" || len(req.Params.InputResponses) > 0 {
		return h.resume(ctx, req, op)
	}
	a := h.approvals(req)
	if !asksByInput(req) {
		pz := h.pausing(req, a.Asker, nil, nil)
		if pz == nil {
			return op(ctx, a, nil)
		}
		a.Asker = pz
		return op(ctx, a, pz.journal)
	}
	return h.startHold(ctx, req, op, a, nil)
}

// startHold runs op on a new hold and waits on it for req. from, when set, is the pause a
// resumed call carries on: its journal answers the program's calls up to the pause, and its
// answer the question asked there.
func (h *handlers) startHold(ctx context.Context, req *mcp.CallToolRequest, op heldOp, a *binding.Approvals, from *resumed) *mcp.CallToolResult {
	hd := &hold{id: budget.NewID("h_"), done: make(chan struct{}), wake: make(chan struct{}, 1)}
	hd.base = pendingState{Tenant: h.agent.Tenant, Agent: h.agent.Name, Run: h.runKey(req), Hold: hd.id, Call: callDigest(req)}
	var j *cassette.Journal
	var asker binding.Asker = holdAsker{hd}
	if from != nil {
		j = from.journal
	}
	if pz := h.pausing(req, asker, hd, j); pz != nil {
		asker, j = pz, pz.journal
	}
	if from != nil {
		asker = &answeredAsker{inner: asker, seq: from.seq, tool: from.tool, ans: from.ans}
	}
	a.Asker = asker
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
		hd.res = op(hctx, a, j)
		h.holds.finished(hd)
		close(hd.done)
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
	for {
		if res := h.inputRequired(hd); res != nil {
			return res
		}
		select {
		case <-hd.done:
			return hd.result()
		case <-hd.wake:
		case <-ctx.Done():
			hd.cancel()
			<-hd.done
			return hd.result()
		}
	}
}

// result is a copy of the call's result, once done has closed: go-sdk writes into the result a
// handler returns (its resultType, its _meta), while a relay may be encoding hd.res for another
// process.
func (hd *hold) result() *mcp.CallToolResult {
	if hd.res == nil {
		return nil
	}
	r := *hd.res
	r.Meta = maps.Clone(hd.res.Meta)
	return &r
}

// inputRequired is the input_required result asking every open question of hd, or nil when
// none is open.
func (h *handlers) inputRequired(hd *hold) *mcp.CallToolResult {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	if len(hd.open) == 0 {
		return nil
	}
	st := hd.base
	reqs := mcp.InputRequestMap{}
	for _, qu := range hd.open {
		st.Questions = append(st.Questions, qu.id)
		if e := qu.expires.UnixMilli(); st.Expires == 0 || e < st.Expires {
			st.Expires = e
		}
		reqs[qu.id] = &mcp.ElicitParams{Mode: "form", Message: qu.q.Message(), RequestedSchema: approvalSchema}
	}
	return &mcp.CallToolResult{InputRequests: reqs, RequestState: h.stateKeys.seal(st)}
}

// resume continues the hold a retry's requestState names with the answers it carries, or
// the pause the ledger kept of it when no process holds it any more, or refuses it, changing
// nothing.
func (h *handlers) resume(ctx context.Context, req *mcp.CallToolRequest, op heldOp) *mcp.CallToolResult {
	hd, why := h.deliver(req)
	if why == whyNoHold && h.pauses != nil {
		return h.resumePause(ctx, req, op)
	}
	if why != "" {
		h.log.Warn("approval retry refused", "tool", req.Params.Name, "reason", why)
		return toolError("the retried call of %s was refused: its requestState %s; nothing was answered or called", req.Params.Name, why)
	}
	return h.await(ctx, req, hd)
}

// deliver checks a retry: its state opens, is this tenant's, agent's and Run's, for the same
// call, not expired nor answered, its hold is here and every question it names is open and
// answered by the retry. Only then are the answers handed to the waiting steps, all at once,
// and the questions marked answered, so a second retry with the same state is refused.
func (h *handlers) deliver(req *mcp.CallToolRequest) (*hold, string) {
	var set struct {
		questions []*question
		answers   []binding.Answer
	}
	st, err := h.stateKeys.open(req.Params.RequestState)
	switch {
	case err != nil:
		return nil, err.Error()
	case st.Tenant != h.agent.Tenant:
		return nil, "was issued to another tenant"
	case st.Agent != h.agent.Name:
		return nil, "was issued for another agent"
	case st.Run != h.runKey(req):
		return nil, "was issued to another session or Run"
	case st.Call != callDigest(req):
		return nil, "was issued for another call (the tool or its arguments differ)"
	}
	now := time.Now()
	h.holds.mu.Lock()
	defer h.holds.mu.Unlock()
	for k, exp := range h.holds.answered {
		if now.After(exp) {
			delete(h.holds.answered, k)
		}
	}
	for _, id := range st.Questions {
		if _, ok := h.holds.answered[id]; ok {
			return nil, "was already answered (a question is answered once)"
		}
	}
	if now.UnixMilli() > st.Expires {
		return nil, fmt.Sprintf("expired at %s: the question was refused unanswered", time.UnixMilli(st.Expires).UTC().Format(time.RFC3339))
	}
	hd := h.holds.byID[st.Hold]
	if hd == nil {
		return nil, whyNoHold
	}
	if h.holds.decidedElsewhere(st.Questions) {
		// An operator answered (pause.go): the retry only waits on the call, or collects
		// its result.
		return hd, ""
	}
	hd.mu.Lock()
	defer hd.mu.Unlock()
	for _, id := range st.Questions {
		var qu *question
		for _, o := range hd.open {
			if o.id == id {
				qu = o
			}
		}
		if qu == nil {
			return nil, "names a question no longer open (its wait ended)"
		}
		r, ok := req.Params.InputResponses[id]
		if !ok {
			return nil, fmt.Sprintf("is not accompanied by an answer to input request %s", id)
		}
		er, ok := r.(*mcp.ElicitResult)
		if !ok || er == nil {
			return nil, fmt.Sprintf("is answered by something other than an elicitation result for %s", id)
		}
		set.questions = append(set.questions, qu)
		set.answers = append(set.answers, binding.Answer{Action: er.Action, By: answeredBy(er.Meta)})
	}
	for i, qu := range set.questions {
		for j, o := range hd.open {
			if o == qu {
				hd.open = append(hd.open[:j], hd.open[j+1:]...)
				break
			}
		}
		qu.answer <- set.answers[i]
		h.holds.answered[qu.id] = time.UnixMilli(st.Expires)
	}
	return hd, ""
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
