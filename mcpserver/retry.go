package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/approval"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/cassette"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/execution"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// A retry carries a requestState and the person's answer (docs/design.md §11). Where the call
// it names is held in this process, the answer goes to the Room (answerHeld) and the retry
// waits on the hold. Where no process here holds it (killed, restarted, or another replica),
// the Room's store still has the question's pause: the retry records the answer there
// (answerPaused), and then either waits for what the process holding the call relays
// (awaitOutcome: that process, alive, carries its own call on) or, once that process is gone,
// runs the program again from its start with the pause's journal (rerun): each journaled call
// is answered from it and not made again, the call it paused on must come again the same and
// is answered with the person's answer, and from there it runs live. A program that takes
// another path is replay_diverged and nothing past the divergence is made. A pause with calls
// in flight besides the paused one is not resumable: their outcome is unknown, so the program
// is never run again.

// whyNoHold is a retry's refusal when no process holds its call and the store kept no pause.
const whyNoHold = "names a call this server no longer holds (it ended, or the server restarted)"

// retry continues the call a retry's requestState names with the answers it carries, or
// refuses it, changing nothing.
func (h *handlers) retry(ctx context.Context, req *mcp.CallToolRequest, op heldOp) *mcp.CallToolResult {
	st, why := h.checkState(req)
	if why == "" {
		hd := h.holds.get(st.Hold)
		if hd == nil {
			return h.answerPaused(ctx, req, op, st)
		}
		if why = h.answerHeld(ctx, req, hd, st); why == "" {
			return h.await(ctx, req, hd)
		}
	}
	h.log.Warn("approval retry refused", "tool", req.Params.Name, "reason", why)
	return toolError("the retried call of %s was refused: its requestState %s; nothing was answered or called", req.Params.Name, why)
}

// checkState opens a retry's state and checks that it is this tenant's, agent's and Run's, for
// the same call, and not expired; why says what is wrong.
func (h *handlers) checkState(req *mcp.CallToolRequest) (st pendingState, why string) {
	st, err := h.stateKeys.open(req.Params.RequestState)
	switch {
	case err != nil:
		return st, err.Error()
	case st.Tenant != h.agent.Tenant:
		return st, "was issued to another tenant"
	case st.Agent != h.agent.Name:
		return st, "was issued for another agent"
	case st.Run != h.runKey(req):
		return st, "was issued to another session or Run"
	case st.Call != callDigest(req):
		return st, "was issued for another call (the tool or its arguments differ)"
	case time.Now().UnixMilli() > st.Expires:
		return st, fmt.Sprintf("expired at %s: the question was refused unanswered", time.UnixMilli(st.Expires).UTC().Format(time.RFC3339))
	}
	return st, ""
}

// answers are the person's answers a retry carries, one per question its state names, or why
// it does not carry them.
func answers(req *mcp.CallToolRequest, st pendingState) ([]approval.Answer, string) {
	out := make([]approval.Answer, 0, len(st.Questions))
	for _, id := range st.Questions {
		r, ok := req.Params.InputResponses[id]
		if !ok {
			return nil, fmt.Sprintf("is not accompanied by an answer to input request %s", id)
		}
		er, ok := r.(*mcp.ElicitResult)
		if !ok || er == nil {
			return nil, fmt.Sprintf("is answered by something other than an elicitation result for %s", id)
		}
		out = append(out, approval.Answer{Action: er.Action, By: answeredBy(er.Meta)})
	}
	return out, ""
}

// answerHeld hands the answers of a retry to the questions of hd, held here: each is recorded
// as its pause's answer (the first from any path stands) and ends the wait of the call on it.
// A question answered on another path is collected: the retry waits on hd like the others.
// Every answer is checked before any is handed over; why says what stops the retry.
func (h *handlers) answerHeld(ctx context.Context, req *mcp.CallToolRequest, hd *hold, st pendingState) (why string) {
	as, why := answers(req, st)
	if why != "" {
		return why
	}
	for i, id := range st.Questions {
		switch {
		case hd.collects(id):
			continue
		case hd.asks(id):
			_, err := h.room.Answer(ctx, id, as[i])
			switch {
			case err == nil || errors.Is(err, budget.ErrAlreadyFinished): // another path's answer stood first
				continue
			case errors.Is(err, budget.ErrNotFound):
				return "names a question no longer open (its wait ended)"
			}
			h.log.Error("approval answer not recorded", "question", id, "err", err)
			return "names a question whose answer could not be recorded"
		}
		if p, err := h.room.Kept(ctx, id); err == nil && p.Status != budget.ApprovalPending {
			return "was already answered (a question is answered once)"
		}
		return "names a question no longer open (its wait ended)"
	}
	return ""
}

// answerPaused carries on the call of a retry whose hold no process here has, from the pause
// the Room's store kept, once the person's answer is recorded and the pause claimed; or
// refuses it, having changed nothing but the record of the answer.
func (h *handlers) answerPaused(ctx context.Context, req *mcp.CallToolRequest, op heldOp, st pendingState) *mcp.CallToolResult {
	refuse := func(why string, args ...any) *mcp.CallToolResult {
		return h.refuseRetry(req, fmt.Sprintf(why, args...))
	}
	if len(st.Questions) != 1 {
		return refuse(whyNoHold)
	}
	id := st.Questions[0]
	p, err := h.room.Kept(ctx, id)
	switch {
	case errors.Is(err, budget.ErrNotFound):
		return refuse(whyNoHold)
	case err != nil:
		h.log.Error("pause not read from the store", "question", id, "err", err)
		return refuse("names a paused call the ledger could not be read for")
	case p.Tenant != st.Tenant || p.Agent != st.Agent || p.Hold != st.Hold:
		return refuse("names a pause of another call")
	}
	as, why := answers(req, st)
	if why != "" {
		return refuse("%s", why)
	}
	if !as[0].Valid() {
		return refuse("is answered with %q, not accept, decline or cancel", as[0].Action)
	}
	answered := false // by this retry
	if p.Status == budget.ApprovalPending {
		p, err = h.room.Answer(ctx, id, as[0])
		if err != nil && !errors.Is(err, budget.ErrAlreadyFinished) {
			h.log.Error("pause answer not recorded", "question", id, "err", err)
			return refuse("names a paused call whose answer could not be recorded")
		}
		answered = err == nil
	}
	if !p.Resumable {
		return refuse("was answered (%s), but the call was paused where it cannot be carried on by another process "+
			"(asked in place, or with other calls of the program in flight, whose outcome is unknown), so the program is not run again", p.Status)
	}
	switch err := h.room.Claim(ctx, id); {
	case errors.Is(err, budget.ErrHeldElsewhere) || answered && errors.Is(err, budget.ErrAlreadyFinished):
		// The process holding the call is alive: it sees the answer (it may have taken it
		// already) and carries the call on, and relays what it comes to through the store.
		return h.awaitOutcome(ctx, req, op, id)
	case err != nil:
		return refuse("was already answered (a question is answered once)")
	}
	return h.rerun(ctx, req, op, p)
}

// refuseRetry refuses a retry that names a pause, saying why; nothing was called.
func (h *handlers) refuseRetry(req *mcp.CallToolRequest, why string) *mcp.CallToolResult {
	h.log.Warn("approval retry refused", "tool", req.Params.Name, "reason", why)
	return toolError("the retried call of %s was refused: its requestState %s; nothing was called", req.Params.Name, why)
}

// awaitOutcome waits for the outcome the process holding question id relays (relayOutcome),
// and returns it as this retry's. Should that process die before it took the answer, the pause
// is claimed here and the call carried on from its journal; should it die after, the outcome
// is unknown and the wait ends with the request.
func (h *handlers) awaitOutcome(ctx context.Context, req *mcp.CallToolRequest, op heldOp, id string) *mcp.CallToolResult {
	h.log.Info("approval retry waits for the process holding the call", "question", id)
	claimed := false
	p, err := h.room.Await(ctx, id, func(p budget.Pause) bool {
		claimed = p.Result == nil && !p.Claimed && h.room.Claim(ctx, id) == nil // the holder died before it took the answer
		return p.Result != nil || claimed
	})
	switch {
	case err != nil:
		return toolError("the retried call of %s was cancelled while another process, holding the call, carried it on with the answer", req.Params.Name)
	case claimed:
		return h.rerun(ctx, req, op, p)
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(p.Result, &res); err != nil {
		h.log.Error("relayed outcome unreadable", "question", id, "err", err)
		return toolError("the retried call of %s was carried on by the process holding it, but what it came to could not be read", req.Params.Name)
	}
	return &res
}

// relayOutcome waits, for a retry that reached another process, for what hd comes to after the
// answer to its question id was given on another path (its result, or its next question) and
// records it with the pause (Room.Relay), where that retry reads it (awaitOutcome). It runs
// begun with the Drain, like the hold.
func (h *handlers) relayOutcome(hd *hold, id string) {
	ctx, end, ok := h.opts.Drain.begin(context.Background())
	if !ok {
		return
	}
	go func() {
		defer end()
		res := hd.outcome(ctx, h.stateKeys)
		if res == nil {
			return
		}
		b, err := json.Marshal(res)
		if err == nil {
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), relayTimeout)
			err = h.room.Relay(wctx, id, b)
			cancel()
		}
		if err != nil {
			h.log.Warn("a held call's outcome not relayed through the store", "question", id, "err", err)
		}
	}()
}

// relayTimeout bounds writing a relayed outcome.
const relayTimeout = 10 * time.Second

// rerun runs the call of pause p, claimed by this process, again from its journal, on a new
// hold: the journal answers the program's calls up to the pause, and the pause's answer the
// question asked there.
func (h *handlers) rerun(ctx context.Context, req *mcp.CallToolRequest, op heldOp, p budget.Pause) *mcp.CallToolResult {
	var calls []cassette.Call
	if len(p.Journal) > 0 {
		if err := json.Unmarshal(p.Journal, &calls); err != nil {
			h.log.Error("pause journal unreadable", "question", p.ID, "err", err)
			return h.refuseRetry(req, "names a paused call whose journal could not be read")
		}
	}
	h.log.Info("resuming a paused call from its journal", "question", p.ID, "tool", p.Tool, "journaled_calls", len(calls), "answer", p.Status)
	j := cassette.NewResumedJournal(calls, cassette.PendingCall(p.Seq, p.Tool, p.Arguments))
	return h.startHold(ctx, req, op, j, approval.Once(p.Seq, p.Tool, approval.AnswerOf(p)))
}

// markRerun marks res, the result of a program run again with journal j, as resumed, and as
// replay_diverged when the program left the journal.
func markRerun(res *execution.Result, j *cassette.Journal) {
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
	rec, act := "no call", "no call (the program ended first)"
	if d.Recorded != nil {
		rec = fmt.Sprintf("%s with arguments %s", d.Recorded.Tool, d.Recorded.Arguments)
	}
	if d.Actual != nil {
		act = fmt.Sprintf("%s with arguments %s", d.Actual.Tool, d.Actual.Arguments)
	}
	return fmt.Sprintf("the program was run again from its start after it paused for approval and its process was gone, and it took another path "+
		"(it read the clock, a random number or something else that changed): call %d was %s where its first run made %s; "+
		"nothing past that call was made", d.Seq, act, rec)
}
