package approval

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
)

// DefaultTimeout is how long a call waits for an answer when Asking.Timeout is zero: the
// profile's approvals.timeout_seconds default.
const DefaultTimeout = 120 * time.Second

// margin is the part of a program's wall clock an approval wait leaves unused, so the program
// hears the refusal and can go on; a wait shorter than minWait is not begun.
const (
	margin  = time.Second
	minWait = time.Second
)

// MaxDeclinesInARow is how many calls of one tool a person may decline (or dismiss) in a row,
// within one execution, before further calls of it are refused without asking: a program
// looping on a call the person refuses does not keep asking.
const MaxDeclinesInARow = 3

// LoggedUnasked is how many unasked decisions of one execution are logged one by one, as many
// as the ledger records one by one (budget.RecordedRefusals).
const LoggedUnasked = budget.RecordedRefusals

// Asking is how one request's questions are asked: through Asker, kept in Room, on behalf of
// Tenant, Agent and Run, for at most Timeout. A nil *Asking asks nobody. Asking holds no state
// of its own: the execution's is its Questions, a question's is its pause.
type Asking struct {
	// Asker puts a question to the person; nil means this host cannot ask.
	Asker Asker
	// Room keeps the questions and takes their answers from every path; nil means a room of
	// this process's memory, made once per Asking (nothing outside this process answers).
	Room *Room
	// Timeout bounds the wait for an answer; zero means DefaultTimeout. Inside a program the
	// wait also ends a second before the program's wall clock.
	Timeout time.Duration
	// PlanWindow is how long a rehearsal's plan, once approved, covers the calls it lists
	// (AskPlan); zero means DefaultPlanWindow.
	PlanWindow time.Duration
	// Report counts each decision (telemetry.Metrics.Approval); the zero Reporter counts none.
	Report telemetry.Reporter
	// Tenant, Agent and Run are whose questions these are, as their pauses record them.
	Tenant, Agent, Run string
	// Hold names the call the questions hold when a client answers them by retrying it
	// (mcpserver's held call; a task would be another): such a question may be carried on by
	// another process. "" for a call asked in place, which no other process can carry on.
	Hold string
	// Journal is the program's tape of calls, which each pause keeps; nil for a direct call.
	Journal Journal
	// Standing answers questions before anyone is asked (a resumed call's answer); nil: none.
	Standing Standing

	roomOnce sync.Once
	own      *Room
}

// room is the Room the questions are kept in.
func (a *Asking) room() *Room {
	if a.Room != nil {
		return a.Room
	}
	a.roomOnce.Do(func() { a.own = NewRoom(nil, nil) })
	return a.own
}

func (a *Asking) timeout() time.Duration {
	if a == nil || a.Timeout <= 0 {
		return DefaultTimeout
	}
	return a.Timeout
}

// report counts one decision for the operator.
func (a *Asking) report(d Decision) {
	if a != nil && d != NotNeeded {
		a.Report.Approval(string(d))
	}
}

// Call is one call at the approval step, as package binding hands it over once the policy
// has said that it needs a person's approval.
type Call struct {
	// Tool is the model-facing name; Reasons say why approval is needed.
	Tool    string
	Reasons []string
	// Arguments are the question's view of the arguments (Question.Arguments); Incomplete,
	// when not empty, says why they cannot be shown so, and then nobody is asked.
	Arguments, Incomplete string
	// Redacted are the arguments as a journal keeps them (Question.Redacted); Logged as the
	// operator's log line shows them, cut.
	Redacted, Logged string
	InProgram        bool
	Seq              int
	// Meter records the approval (nil: nothing is recorded); Log is the operator's log.
	Meter *budget.Meter
	Log   *slog.Logger
	// Questions are the execution's; nil for a direct call, asked at once and not counted.
	Questions *Questions
	// AnsweredBy, when set, is left who answered (Answer.By), for the call's line in the
	// result's tool_calls.
	AnsweredBy *string
	// CallID is the id the call is recorded under if it is made, chosen by the caller (which
	// notes it before the call is admitted); "" for a new one.
	CallID string
}

// Ask is the approval step of a call that needs a person's approval (docs/design.md §11, §12.2
// hop 5): the question, recorded pending first (budget.Meter.AskApproval), asked in its
// execution's turn through the Room, which keeps it as a pause and takes its first answer from
// any path, and the decision recorded after (DecideApproval, with who answered). The call may
// proceed when the returned error is nil, under callID (the id its approval record names).
func (a *Asking) Ask(ctx context.Context, c Call) (d Decision, callID string, _ *failure.Error) {
	why := strings.Join(c.Reasons, "; ")
	ask := budget.ApprovalAsk{ID: budget.NewID("a_"), CallID: c.CallID, Tool: c.Tool, Reason: why}
	if ask.CallID == "" {
		ask.CallID = budget.NewID("c_")
	}
	q := Question{Tool: c.Tool, Reasons: c.Reasons, InProgram: c.InProgram, Wait: a.timeout(), Seq: c.Seq,
		Arguments: c.Arguments, Redacted: c.Redacted, Call: ask.CallID}
	var by string
	defer func() {
		c.logDecision(d, ask, by)
		c.Questions.count(d)
		a.report(d)
		if c.AnsweredBy != nil {
			*c.AnsweredBy = by
		}
	}()
	// A standing answer (a resumed call's, an approved plan's) needs nobody to ask: it stands
	// whether this host can ask or not.
	standing, stands := a.standing(ctx, q, c)
	release := func() {}
	if !stands {
		r, fe := a.askable(ctx, c, &q, why)
		if fe != nil {
			// Refused without asking, recorded unasked (summarised past the first few:
			// budget.RecordedRefusals).
			ask.Status = budget.ApprovalUnasked
			c.record(ctx, ask)
			return Unasked, "", fe
		}
		release = r
	}
	defer release()
	ask.Status = budget.ApprovalPending
	if err := c.record(ctx, ask); err != nil {
		return Failed, "", failure.Wrap(failure.UpstreamError, err,
			"the request for approval of %s could not be recorded, so nobody was asked and it was not called", c.Tool)
	}
	ans, err, lapsed := standing, error(nil), false
	if !stands {
		ans, err, lapsed = a.answer(ctx, q)
	}
	d, by = decision(ans, err, lapsed), ans.By
	c.Questions.decided(c.Tool, d)
	if err != nil && d == Failed {
		c.Log.Warn("approval question failed", "tool", c.Tool, "err", err)
	}
	if c.Meter != nil {
		derr := c.Meter.DecideApproval(ctx, budget.ApprovalDecision{ID: ask.ID, Status: budget.ApprovalStatus(d), AnsweredBy: ans.By})
		if derr != nil && d == Accepted {
			// Accepted but not recorded (or recorded unknown by a survivor after this process
			// stalled): the call is not made without its approval in the ledger.
			return Failed, "", failure.Wrap(failure.UpstreamError, derr,
				"the approval of %s could not be recorded, so it was not called", c.Tool)
		}
		if derr != nil {
			c.Log.Error("approval decision not recorded", "approval", ask.ID, "err", derr)
		}
	}
	return d, ask.CallID, refusal(d, c.Tool, q.Wait, ctx.Err() != nil)
}

// askable says whether q may be put for c now (why is why c needs approval): a host that
// can ask, a wait that fits the program's wall clock (q.Wait shortened to it), arguments a
// question shows in full, and the execution's turn, taken (release gives it back) within q's
// own wait, which is left what remains of it. Otherwise the refusal says why nobody is asked.
func (a *Asking) askable(ctx context.Context, c Call, q *Question, why string) (release func(), _ *failure.Error) {
	var cannot string
	if a == nil || a.Asker == nil {
		cannot = "nothing connects it to a person"
	} else if ok, w := a.Asker.CanAsk(); !ok {
		cannot = w
	} else if dl, ok := ctx.Deadline(); ok && time.Until(dl)-margin < q.Wait {
		q.Wait = time.Until(dl) - margin
		if q.Wait < minWait {
			cannot = "the program's wall clock has too little time left to wait for an answer"
		}
	}
	if cannot != "" {
		return nil, failure.New(failure.ApprovalRequiredInProgram,
			"%s needs a person's approval (%s), and this host cannot ask for it: %s; it was not called", c.Tool, why, cannot)
	}
	// A question shows everything that decides it, or is not asked.
	if c.Incomplete != "" {
		return nil, failure.New(failure.ApprovalRequiredInProgram,
			"%s needs a person's approval (%s), and a question could not show its arguments in full: %s; nobody was asked and it was not called",
			c.Tool, why, c.Incomplete)
	}
	// One question of an execution at a time: the others wait their turn within their own
	// approval wait, so a program cannot pile questions on the person.
	deadline := time.Now().Add(q.Wait)
	release, waited, ok := c.Questions.turn(ctx, q.Wait)
	switch {
	case !ok && ctx.Err() != nil:
		return nil, failure.New(failure.Cancelled,
			"the call of %s was cancelled while it waited to ask for a person's approval; it was not called", c.Tool)
	case !ok:
		return nil, failure.New(failure.ApprovalRequiredInProgram,
			"%s needs a person's approval (%s), and another question of this program stayed open for the whole wait (%s); nobody was asked and it was not called",
			c.Tool, why, q.Wait.Round(time.Second))
	}
	if n := c.Questions.declines(c.Tool); n >= MaxDeclinesInARow {
		release()
		return nil, failure.New(failure.Denied,
			"the person declined the last %d calls of %s in this program, so it is refused without asking again; it was not called", n, c.Tool)
	}
	if waited {
		q.Wait = time.Until(deadline)
	}
	if waited && q.Wait < minWait {
		release()
		return nil, failure.New(failure.ApprovalRequiredInProgram,
			"%s needs a person's approval (%s), and too little of the wait was left after other questions of this program; nobody was asked and it was not called",
			c.Tool, why)
	}
	return release, nil
}

// standing is the standing answer to q, the question of call c, if there is one: never for
// a call whose arguments a question could not show in full.
func (a *Asking) standing(ctx context.Context, q Question, c Call) (Answer, bool) {
	if a == nil || a.Standing == nil || c.Incomplete != "" {
		return Answer{}, false
	}
	return a.Standing.Answer(ctx, q)
}

// answer is q's answer: the first from any path while the Room keeps q as a pause, for at most
// q.Wait. lapsed says the wait ran out with no answer.
func (a *Asking) answer(ctx context.Context, q Question) (_ Answer, _ error, lapsed bool) {
	actx, cancel := context.WithTimeout(ctx, q.Wait)
	defer cancel()
	ans, err := a.room().put(actx, a, q)
	return ans, err, errors.Is(actx.Err(), context.DeadlineExceeded) && !errors.Is(ctx.Err(), context.Canceled)
}

// refusal is the failure a decision d on a call of tool refuses it with, nil for an acceptance.
func refusal(d Decision, tool string, wait time.Duration, cancelled bool) *failure.Error {
	switch d {
	case Accepted:
		return nil
	case Declined:
		return failure.New(failure.Denied, "the person declined the call of %s; it was not called", tool)
	case Cancelled:
		return failure.New(failure.Denied, "the person dismissed the request to approve %s without accepting it; it was not called", tool)
	case TimedOut:
		return failure.New(failure.ApprovalRequiredInProgram,
			"nobody answered the request for approval of %s within %s; it was not called", tool, wait.Round(time.Second))
	}
	if cancelled {
		return failure.New(failure.Cancelled, "the call of %s was cancelled while it waited for a person's approval; it was not called", tool)
	}
	return failure.New(failure.ApprovalRequiredInProgram, "the request for approval of %s got no answer from the host; it was not called", tool)
}

// decision reads an answer, or what ended the wait without one: the deadline (lapsed), or
// anything else.
func decision(ans Answer, err error, lapsed bool) Decision {
	switch {
	case err == nil && ans.Action == Accept:
		return Accepted
	case err == nil && ans.Action == Decline:
		return Declined
	case err == nil && ans.Action == Cancel:
		return Cancelled
	case err != nil && lapsed:
		return TimedOut
	}
	return Failed
}

// record writes ask through the meter, if any; a failure of an unasked record is logged only
// (the call is refused anyway).
func (c Call) record(ctx context.Context, ask budget.ApprovalAsk) error {
	if c.Meter == nil {
		return nil
	}
	err := c.Meter.AskApproval(ctx, ask)
	if err != nil && ask.Status == budget.ApprovalUnasked {
		c.Log.Error("approval refusal not recorded", "tool", ask.Tool, "err", err)
	}
	return err
}

// logDecision is the operator's line for every decision, with the arguments redacted and cut
// for a log, not in full as the person saw them; past the execution's first LoggedUnasked
// unasked decisions, one line says the rest are only counted.
func (c Call) logDecision(d Decision, ask budget.ApprovalAsk, by string) {
	if d == NotNeeded {
		return
	}
	if d == Unasked && c.Questions != nil {
		switch n := c.Questions.unaskedLogged.Add(1); {
		case n == LoggedUnasked+1:
			c.Log.Info("approval: further unasked decisions of this execution are counted, not logged", "tool", c.Tool,
				"logged", LoggedUnasked)
			return
		case n > LoggedUnasked:
			return
		}
	}
	c.Log.Info("approval", "tool", c.Tool, "decision", string(d), "approval", ask.ID, "reason", ask.Reason,
		"arguments", c.Logged, "in_program", c.InProgram, "answered_by", by)
}

// Questions are one execution's questions: at most one open at a time (its turn), the declines
// in a row per tool, the decisions counted for the result, and the unasked ones logged. The
// zero value is ready; a nil *Questions (a direct call's) queues, counts and bounds nothing.
// Safe for concurrent use.
type Questions struct {
	once  sync.Once
	turns chan struct{} // holds a token while a question is open

	mu       sync.Mutex // guards declined and counts
	declined map[string]int
	counts   Counts

	unaskedLogged atomic.Int64
}

// turn takes the execution's turn to ask, waiting until ctx ends or d passes; release gives it
// back. ok is false when the turn did not come; waited says whether it had to wait.
func (qs *Questions) turn(ctx context.Context, d time.Duration) (release func(), waited, ok bool) {
	if qs == nil {
		return func() {}, false, true
	}
	qs.once.Do(func() { qs.turns = make(chan struct{}, 1) })
	select {
	case qs.turns <- struct{}{}:
		return func() { <-qs.turns }, false, true
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case qs.turns <- struct{}{}:
		return func() { <-qs.turns }, true, true
	case <-ctx.Done():
	case <-t.C:
	}
	return nil, true, false
}

// declines returns how many calls of tool the person declined in a row.
func (qs *Questions) declines(tool string) int {
	if qs == nil {
		return 0
	}
	qs.mu.Lock()
	defer qs.mu.Unlock()
	return qs.declined[tool]
}

// decided counts d for tool: a decline or dismissal adds one to the row, an acceptance ends it.
func (qs *Questions) decided(tool string, d Decision) {
	if qs == nil {
		return
	}
	qs.mu.Lock()
	defer qs.mu.Unlock()
	switch d {
	case Declined, Cancelled:
		if qs.declined == nil {
			qs.declined = map[string]int{}
		}
		qs.declined[tool]++
	case Accepted:
		delete(qs.declined, tool)
	}
}

// count adds d to the counts.
func (qs *Questions) count(d Decision) {
	if qs == nil || d == NotNeeded {
		return
	}
	qs.mu.Lock()
	defer qs.mu.Unlock()
	switch d {
	case Unasked:
		qs.counts.Unasked++
		return
	case Accepted:
		qs.counts.Accepted++
	case Declined, Cancelled:
		qs.counts.Declined++
	case TimedOut:
		qs.counts.TimedOut++
	}
	qs.counts.Asked++
}

// Counts returns the decisions so far: the result's approvals.
func (qs *Questions) Counts() Counts {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	return qs.counts
}

// Decision is what the approval step decided for one call, as the ledger records it and the
// result counts it.
type Decision string

// The decisions. NotNeeded: the call needs no approval.
const (
	NotNeeded Decision = ""
	Accepted  Decision = Decision(budget.ApprovalAccepted)
	Declined  Decision = Decision(budget.ApprovalDeclined)
	Cancelled Decision = Decision(budget.ApprovalCancelled)
	TimedOut  Decision = Decision(budget.ApprovalTimedOut)
	Failed    Decision = Decision(budget.ApprovalFailed)
	Unasked   Decision = Decision(budget.ApprovalUnasked)
)

// Counts are the decisions on an execution's calls that needed a person's approval, as the
// result document carries them. Asked counts the questions put; each ends accepted, declined
// (declined or dismissed), timed out, or, when the host failed to answer, in none of these.
// Unasked counts calls refused because the host cannot ask anyone.
type Counts struct {
	Asked    int64 `json:"asked"`
	Accepted int64 `json:"accepted"`
	Declined int64 `json:"declined"`
	TimedOut int64 `json:"timed_out"`
	Unasked  int64 `json:"unasked"`
}
