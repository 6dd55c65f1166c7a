package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/binding"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/cassette"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/execution"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// Pauses: a call waiting for a person's approval outlives its process (docs/design.md §11).
//
// When the ledger keeps pauses (budget.Pauses: both run ledgers do), every question put to a
// person is first saved there: who asks, the tool, its redacted arguments, and the program's
// journal up to the call (package cassette: every call it made and what it was answered,
// kept by a Journal tape on the execution). Then two channels may answer it, and the first
// answer stands (DecidePause): the client (elicitation/create, or a retry with input
// responses), or an operator (`mcp-sandbox approvals`), whose answer the waiting call sees
// within Options.PausePoll. Whoever carries the call on claims the pause once (ClaimPause).
//
// When the process holding a program is gone (killed, restarted), a client of 2026-07-28 that
// retries with its requestState reaches a process with no such hold; that process reads the
// pause, records the answer, claims it (only once the holder's ledger owner is gone: a live
// holder carries its own call on), and runs the program again from its start on a fresh child
// with the journal: each journaled call is answered from it and not made again, the call it
// paused on must come again the same and is answered with the person's answer, and from there
// it runs live. A program that takes another path is replay_diverged and nothing past the
// divergence is made. A pause with calls in flight besides the paused one is not resumable:
// their outcome is unknown, so the program is never run again.

// DefaultPausePoll is how often a call waiting for an answer looks for an operator's in the
// ledger (Options.PausePoll).
const DefaultPausePoll = time.Second

// pauseWriteTimeout bounds a pause's records written after the call's context ended.
const pauseWriteTimeout = 10 * time.Second

// whyNoHold is a retry's refusal when no process holds its call and the ledger kept no pause.
const whyNoHold = "names a call this server no longer holds (it ended, or the server restarted)"

// idAsker asks a question under an id of the caller's choosing: the pause's.
type idAsker interface {
	binding.Asker
	askAs(ctx context.Context, id string, q binding.Question) (binding.Answer, error)
}

func (a sessionAsker) askAs(ctx context.Context, _ string, q binding.Question) (binding.Answer, error) {
	return a.Ask(ctx, q)
}

// pausingAsker saves each question as a pause before inner asks it, and takes whichever
// answer comes first, the person's through inner or an operator's through the ledger.
type pausingAsker struct {
	h     *handlers
	inner idAsker
	// hd is the hold inner parks questions on; nil for a call asked in place, which no retry
	// can carry on elsewhere (not resumable).
	hd  *hold
	run string
	// journal is the execution's tape of calls: what a pause keeps.
	journal *cassette.Journal
}

// pausing returns the asker that keeps inner's questions as pauses, with the journal of the
// program (j, or a new one), or nil when the ledger keeps no pauses or inner cannot ask.
func (h *handlers) pausing(req *mcp.CallToolRequest, inner binding.Asker, hd *hold, j *cassette.Journal) *pausingAsker {
	ia, ok := inner.(idAsker)
	if h.pauses == nil || !ok {
		return nil
	}
	if can, _ := ia.CanAsk(); !can {
		return nil
	}
	if j == nil {
		j = cassette.NewJournal()
	}
	return &pausingAsker{h: h, inner: ia, hd: hd, run: h.runKey(req), journal: j}
}

func (a *pausingAsker) CanAsk() (bool, string) { return a.inner.CanAsk() }

func (a *pausingAsker) Ask(ctx context.Context, q binding.Question) (binding.Answer, error) {
	id := budget.NewID("q_")
	expires := expiry(ctx, q.Wait)
	saved, resumable := a.save(ctx, id, q, expires)
	if !saved {
		return a.inner.askAs(ctx, id, q)
	}
	ictx, cancel := context.WithCancel(ctx)
	defer cancel()
	type reply struct {
		ans binding.Answer
		err error
	}
	got := make(chan reply, 1)
	go func() {
		ans, err := a.inner.askAs(ictx, id, q)
		got <- reply{ans, err}
	}()
	tick := time.NewTicker(a.h.opts.PausePoll)
	defer tick.Stop()
	for {
		select {
		case r := <-got:
			return a.answered(ctx, id, resumable, r.ans, r.err)
		case <-tick.C:
			p, err := a.h.pauses.Pause(ctx, id)
			if err != nil || p.Status == budget.ApprovalPending {
				continue
			}
			// Answered on another channel: the question put to the client is withdrawn. A
			// retry of it waits on the hold from now on (marked before the withdrawal, so
			// no retry finds it neither open nor answered).
			if a.hd != nil {
				a.h.holds.releasedElsewhere(a.hd, id, expires)
			}
			cancel()
			r := <-got
			if a.hd != nil {
				// Once the question is withdrawn: what the call comes to next is relayed.
				a.h.relay(a.hd, id)
			}
			if r.err == nil {
				return a.answered(ctx, id, resumable, r.ans, nil) // both at once: the ledger says which stands
			}
			a.h.log.Info("approval answered by the operator's channel", "question", id, "tool", q.Tool, "answer", p.Status, "by", p.AnsweredBy)
			return a.claim(ctx, id, p)
		}
	}
}

// save keeps q as a pause, and says whether another process could carry it on; saved is
// false when the ledger would not (the call is then asked as without pauses, and logged).
func (a *pausingAsker) save(ctx context.Context, id string, q binding.Question, expires time.Time) (saved, resumable bool) {
	p := budget.Pause{ID: id, Tenant: a.h.agent.Tenant, Agent: a.h.agent.Name, Run: a.run, Tool: q.Tool,
		Arguments: q.Redacted, View: q.Arguments, Reason: strings.Join(q.Reasons, "; "), Seq: q.Seq, AskedAt: time.Now(), Expires: expires}
	if a.hd != nil {
		p.Hold, p.Resumable = a.hd.id, true
	}
	calls := a.journal.Calls()
	for i, c := range calls {
		if c.Seq != i+1 || c.Seq >= q.Seq {
			p.Resumable = false // a call after the paused one ended first: not journaled in order
		}
	}
	if len(calls) != max(q.Seq-1, 0) || len(a.journal.InFlight(q.Seq)) > 0 {
		p.Resumable = false // calls in flight: their outcome would be unknown
	}
	b, err := json.Marshal(calls)
	if err == nil {
		p.Journal = b
		err = a.h.pauses.SavePause(ctx, p)
	}
	if err != nil {
		a.h.log.Warn("approval question not kept in the ledger: it lasts only as long as this process", "tool", q.Tool, "err", err)
		return false, false
	}
	if tell := a.h.opts.Paused; tell != nil {
		p.Status = budget.ApprovalPending
		tell(ApprovalOf(p))
	}
	return true, p.Resumable
}

// answered records the person's answer as the pause's, unless an operator answered first:
// then that answer stands. A question that lapsed is forgotten (refused, as it always was),
// and so is one no other process could carry on; a resumable one whose wait was cancelled
// (the request, or this process stopping) is kept, for a retry or an operator, until it
// expires.
func (a *pausingAsker) answered(ctx context.Context, id string, resumable bool, ans binding.Answer, err error) (binding.Answer, error) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pauseWriteTimeout)
	defer cancel()
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || !resumable {
			if derr := a.h.pauses.DropPause(wctx, id); derr != nil {
				a.h.log.Warn("lapsed approval not dropped from the ledger", "question", id, "err", derr)
			}
		}
		return ans, err
	}
	status, ok := statusOf(ans.Action)
	if !ok {
		return ans, nil
	}
	p, derr := a.h.pauses.DecidePause(wctx, id, status, ans.By)
	if derr != nil && !errors.Is(derr, budget.ErrAlreadyFinished) {
		a.h.log.Warn("approval answer not recorded with its pause", "question", id, "err", derr)
		return ans, nil
	}
	if derr != nil && a.hd != nil {
		// Another answer stood first, perhaps a retry's waiting in another process: it hears
		// what the call comes to.
		a.h.relay(a.hd, id)
	}
	return a.claim(wctx, id, p)
}

// claim takes the decided pause p for this process, which carries the call on, and returns
// its answer. A pause another process claimed (it found this one's ledger owner gone) is that
// process's to carry on: this hold is cancelled, so the call is never made twice.
func (a *pausingAsker) claim(ctx context.Context, id string, p budget.Pause) (binding.Answer, error) {
	if err := a.h.pauses.ClaimPause(context.WithoutCancel(ctx), id); err != nil {
		if a.hd != nil && errors.Is(err, budget.ErrAlreadyFinished) {
			a.hd.cancel()
		}
		return binding.Answer{}, fmt.Errorf("the answer to %s could not be claimed: %w", id, err)
	}
	return answerOf(p), nil
}

// statusOf is the pause status an answer's action records.
func statusOf(action string) (budget.ApprovalStatus, bool) {
	switch action {
	case binding.AnswerAccept:
		return budget.ApprovalAccepted, true
	case binding.AnswerDecline:
		return budget.ApprovalDeclined, true
	case binding.AnswerCancel:
		return budget.ApprovalCancelled, true
	}
	return "", false
}

// answerOf is the answer a decided pause records.
func answerOf(p budget.Pause) binding.Answer {
	by := p.AnsweredBy
	switch p.Status {
	case budget.ApprovalAccepted:
		return binding.Answer{Action: binding.AnswerAccept, By: by}
	case budget.ApprovalDeclined:
		return binding.Answer{Action: binding.AnswerDecline, By: by}
	}
	return binding.Answer{Action: binding.AnswerCancel, By: by}
}

// answeredAsker answers the question of a resumed call's pause (the call numbered seq, of
// tool) with the answer it was given, once; any other question goes to inner.
type answeredAsker struct {
	inner binding.Asker
	seq   int
	tool  string
	ans   binding.Answer
	used  atomic.Bool
}

func (a *answeredAsker) CanAsk() (bool, string) { return true, "" }

func (a *answeredAsker) Ask(ctx context.Context, q binding.Question) (binding.Answer, error) {
	if q.Seq == a.seq && q.Tool == a.tool && a.used.CompareAndSwap(false, true) {
		return a.ans, nil
	}
	return a.inner.Ask(ctx, q)
}

// heldBy is the hold an asker parks its questions on, or nil.
func heldBy(a binding.Asker) *hold {
	switch a := a.(type) {
	case holdAsker:
		return a.hd
	case *pausingAsker:
		return heldBy(a.inner)
	case *answeredAsker:
		return heldBy(a.inner)
	}
	return nil
}

// resumed is the pause a resumed call carries on.
type resumed struct {
	journal *cassette.Journal
	seq     int
	tool    string
	ans     binding.Answer
}

// resumePause carries on the call of a retry whose hold no process has: from the pause the
// ledger kept, once the person's answer is recorded and the pause claimed; or refuses it,
// having changed nothing but the record of the answer.
func (h *handlers) resumePause(ctx context.Context, req *mcp.CallToolRequest, op heldOp) *mcp.CallToolResult {
	refuse := func(why string, args ...any) *mcp.CallToolResult {
		return h.refuseRetry(req, fmt.Sprintf(why, args...))
	}
	st, err := h.stateKeys.open(req.Params.RequestState)
	if err != nil || len(st.Questions) != 1 {
		return refuse(whyNoHold)
	}
	id := st.Questions[0]
	p, err := h.pauses.Pause(ctx, id)
	switch {
	case errors.Is(err, budget.ErrNotFound):
		return refuse(whyNoHold)
	case err != nil:
		h.log.Error("pause not read from the ledger", "question", id, "err", err)
		return refuse("names a paused call the ledger could not be read for")
	case p.Tenant != st.Tenant || p.Agent != st.Agent || p.Hold != st.Hold:
		return refuse("names a pause of another call")
	}
	er, ok := req.Params.InputResponses[id].(*mcp.ElicitResult)
	if !ok || er == nil {
		return refuse("is not accompanied by an elicitation result answering input request %s", id)
	}
	status, ok := statusOf(er.Action)
	if !ok {
		return refuse("is answered with %q, not accept, decline or cancel", er.Action)
	}
	if p.Status == budget.ApprovalPending {
		p, err = h.pauses.DecidePause(ctx, id, status, answeredBy(er.Meta))
		if err != nil && !errors.Is(err, budget.ErrAlreadyFinished) {
			h.log.Error("pause answer not recorded", "question", id, "err", err)
			return refuse("names a paused call whose answer could not be recorded")
		}
	}
	if !p.Resumable {
		return refuse("was answered (%s), but the call was paused where it cannot be carried on by another process "+
			"(asked in place, or with other calls of the program in flight, whose outcome is unknown), so the program is not run again", p.Status)
	}
	switch err := h.pauses.ClaimPause(ctx, id); {
	case errors.Is(err, budget.ErrHeldElsewhere):
		// The process holding the call is alive: it sees the answer and carries the call on,
		// and relays what it comes to through the ledger.
		return h.awaitRelay(ctx, req, op, id)
	case err != nil:
		return refuse("was already answered (a question is answered once)")
	}
	return h.resumeFrom(ctx, req, op, id, p)
}

// refuseRetry refuses a retry that names a pause, saying why; nothing was called.
func (h *handlers) refuseRetry(req *mcp.CallToolRequest, why string) *mcp.CallToolResult {
	h.log.Warn("approval retry refused", "tool", req.Params.Name, "reason", why)
	return toolError("the retried call of %s was refused: its requestState %s; nothing was called", req.Params.Name, why)
}

// resumeFrom runs the call of pause p, claimed by this process, again from its journal.
func (h *handlers) resumeFrom(ctx context.Context, req *mcp.CallToolRequest, op heldOp, id string, p budget.Pause) *mcp.CallToolResult {
	h.holds.markAnswered(id, p.Expires)
	var calls []cassette.Call
	if len(p.Journal) > 0 {
		if err := json.Unmarshal(p.Journal, &calls); err != nil {
			h.log.Error("pause journal unreadable", "question", id, "err", err)
			return h.refuseRetry(req, "names a paused call whose journal could not be read")
		}
	}
	h.log.Info("resuming a paused call from its journal", "question", id, "tool", p.Tool, "journaled_calls", len(calls), "answer", p.Status)
	from := &resumed{journal: cassette.NewResumedJournal(calls, cassette.PendingCall(p.Seq, p.Tool, p.Arguments)),
		seq: p.Seq, tool: p.Tool, ans: answerOf(p)}
	return h.startHold(ctx, req, op, h.approvals(req), from)
}

// resumedResult marks res, the result of a program resumed with journal j, as resumed, and
// as replay_diverged when the program left the journal.
func resumedResult(res *execution.Result, j *cassette.Journal) {
	if j == nil || !j.Resuming() {
		return
	}
	res.Resumed = &execution.Resumed{ReplayedCalls: j.Replayed()}
	if d := j.Divergence(); d != nil {
		res.Failure = &engine.Failure{Kind: failure.ReplayDiverged, Executed: true, Message: divergenceMessage(d)}
	}
}

// divergenceMessage says where a resumed program left its journal.
func divergenceMessage(d *cassette.Divergence) string {
	rec, act := d.Calls()
	return fmt.Sprintf("the program was run again from its start after it paused for approval and its process was gone, and it took another path "+
		"(it read the clock, a random number or something else that changed): call %d was %s where its first run made %s; "+
		"nothing past that call was made", d.Seq, act, rec)
}

// relay waits, on behalf of a retry that reached another process, for what hd comes to after
// the answer to question id (its result, or its next question) and records it with the pause,
// where that process reads it (awaitRelay). It runs begun with the Drain, like the hold.
func (h *handlers) relay(hd *hold, id string) {
	ctx, end, ok := h.opts.Drain.begin(context.Background())
	if !ok {
		return
	}
	go func() {
		defer end()
		tick := time.NewTicker(h.opts.PausePoll)
		defer tick.Stop()
		var res *mcp.CallToolResult
		for res == nil {
			if res = h.inputRequired(hd); res != nil {
				break
			}
			select {
			case <-hd.done:
				res = hd.res
			case <-tick.C: // a wake another waiter took
			case <-ctx.Done():
				return
			}
		}
		b, err := json.Marshal(res)
		if err == nil {
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pauseWriteTimeout)
			err = h.pauses.SetPauseResult(wctx, id, b)
			cancel()
		}
		if err != nil {
			h.log.Warn("a held call's outcome not relayed through the ledger", "question", id, "err", err)
		}
	}()
}

// awaitRelay waits for the outcome the process holding pause id relays (relay), and returns
// it as this retry's. Should that process die before it took the answer, the pause is claimed
// here and the call carried on from its journal; should it die after, the outcome is unknown
// and the wait ends with the request.
func (h *handlers) awaitRelay(ctx context.Context, req *mcp.CallToolRequest, op heldOp, id string) *mcp.CallToolResult {
	h.log.Info("approval retry waits for the process holding the call", "question", id)
	tick := time.NewTicker(h.opts.PausePoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return toolError("the retried call of %s was cancelled while another process, holding the call, carried it on with the answer", req.Params.Name)
		case <-tick.C:
		}
		p, err := h.pauses.Pause(ctx, id)
		if err != nil {
			continue
		}
		if p.Result != nil {
			var res mcp.CallToolResult
			if err := json.Unmarshal(p.Result, &res); err != nil {
				h.log.Error("relayed outcome unreadable", "question", id, "err", err)
				return toolError("the retried call of %s was carried on by the process holding it, but what it came to could not be read", req.Params.Name)
			}
			return &res
		}
		if !p.Claimed && h.pauses.ClaimPause(ctx, id) == nil {
			return h.resumeFrom(ctx, req, op, id, p) // the holder died before it took the answer
		}
	}
}
