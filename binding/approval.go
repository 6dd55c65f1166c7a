package binding

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

// DefaultApprovalTimeout is how long a call waits for a person's answer when
// Approvals.Timeout is zero: the profile's approvals.timeout_seconds default.
const DefaultApprovalTimeout = 120 * time.Second

// approvalMargin is the part of a program's wall clock an approval wait leaves unused, so the
// program hears the refusal and can go on; a wait shorter than minApprovalWait is not begun.
const (
	approvalMargin  = time.Second
	minApprovalWait = time.Second
)

// maxShownArguments bounds the arguments a log line holds.
const maxShownArguments = 2000

// maxRedactedArguments bounds a question's Redacted arguments: as a journal keeps them
// (package cassette's bound), so a resumed call compares equal.
const maxRedactedArguments = 64 << 10

// maxQuestionArguments bounds the arguments a question shows; arguments that take more to
// show in full are not put to a person (upstream.Tool.ApprovalView).
const maxQuestionArguments = 16 << 10

// maxDeclinesInARow is how many calls of one tool a person may decline (or dismiss) in a row,
// within one execution, before further calls of it are refused without asking: a program
// looping on a call the person refuses does not keep asking.
const maxDeclinesInARow = 3

// Asker puts a question to the person at the MCP host: mcpserver's is elicitation/create on
// the session that made the call.
type Asker interface {
	// CanAsk reports whether this host can ask its person at all and, when it cannot, why: a
	// phrase completing "this host cannot ask for it: ...". Nothing is sent.
	CanAsk() (ok bool, why string)
	// Ask puts q to the person and waits for the answer until ctx ends (the approval's
	// deadline among its reasons). An error means no answer came.
	Ask(ctx context.Context, q Question) (Answer, error)
}

// Question is what a person is asked about one call.
type Question struct {
	// Tool is the model-facing name of the tenant's tool.
	Tool string
	// Arguments are the call's arguments, every key path with its value in full, and the
	// values not shown named with the reason (upstream.Tool.ApprovalView): the one view of
	// them that the person and, through the pause that keeps it, an operator decide on.
	Arguments string
	// Reasons say why approval is needed.
	Reasons []string
	// InProgram is true for a program's call, false for the model's direct call.
	InProgram bool
	// Wait is how long the question stays open.
	Wait time.Duration
	// Seq is the call's number in its program's tape (Options.Tape), 0 for a direct call or
	// without a tape.
	Seq int
	// Redacted are the arguments as a log line shows them (upstream.Tool.RedactArguments):
	// what a journal keeps, and a resumed call is compared by. Never what anyone decides on.
	Redacted string
}

// Message is the text a person reads: the tool, who calls it, why it needs approval, the
// arguments, and how long the question stays open.
func (q Question) Message() string {
	var b strings.Builder
	who := "The assistant calls"
	if q.InProgram {
		who = "A program the assistant is running calls"
	}
	fmt.Fprintf(&b, "Approve one call of %s?\n%s %s, which needs your approval: %s.\n", q.Tool, who, q.Tool, strings.Join(q.Reasons, "; "))
	fmt.Fprintf(&b, "Arguments, every one in full:\n%s", q.Arguments)
	fmt.Fprintf(&b, "Accept to let this one call run; decline to refuse it. Without an answer within %s it is refused.", q.Wait.Round(time.Second))
	return b.String()
}

// The actions an Answer carries (MCP elicitation's).
const (
	AnswerAccept  = "accept"
	AnswerDecline = "decline"
	AnswerCancel  = "cancel"
)

// Answer is a person's answer to a Question.
type Answer struct {
	// Action is AnswerAccept, AnswerDecline or AnswerCancel.
	Action string
	// By is who answered, when the host says; "" otherwise.
	By string
}

// Approvals configure the approval step of calls: who can be asked, and how long a call waits.
// A nil *Approvals asks nobody.
type Approvals struct {
	// Asker asks the person; nil means this host cannot ask.
	Asker Asker
	// Timeout bounds the wait for an answer; zero means DefaultApprovalTimeout. Inside a
	// program the wait also ends a second before the program's wall clock.
	Timeout time.Duration
	// Report counts each decision (telemetry.Metrics.Approval); the zero Reporter counts none.
	Report telemetry.Reporter
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

// ApprovalCounts are the decisions on an execution's calls that needed a person's approval, as
// the result document carries them. Asked counts the questions put; each ends accepted,
// declined (declined or dismissed), timed out, or, when the host failed to answer, in none of
// these. Unasked counts calls refused because the host cannot ask anyone.
type ApprovalCounts struct {
	Asked    int64 `json:"asked"`
	Accepted int64 `json:"accepted"`
	Declined int64 `json:"declined"`
	TimedOut int64 `json:"timed_out"`
	Unasked  int64 `json:"unasked"`
}

// tally counts decisions; safe for concurrent use.
type tally struct {
	mu sync.Mutex
	c  ApprovalCounts
}

func (t *tally) add(d Decision) {
	if t == nil || d == NotNeeded {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch d {
	case Unasked:
		t.c.Unasked++
		return
	case Accepted:
		t.c.Accepted++
	case Declined, Cancelled:
		t.c.Declined++
	case TimedOut:
		t.c.TimedOut++
	}
	t.c.Asked++
}

func (t *tally) counts() ApprovalCounts {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.c
}

// asking is one execution's questions: at most one open at a time (turn), and the declines
// in a row per tool. The zero value is ready; a nil *asking (a direct call) queues nothing.
type asking struct {
	once sync.Once
	turn chan struct{} // holds a token while a question is open

	mu       sync.Mutex // guards declined
	declined map[string]int
}

// wait takes the execution's turn to ask, waiting until ctx ends or d passes; release gives
// it back. ok is false when the turn did not come; waited says whether it had to wait.
func (q *asking) wait(ctx context.Context, d time.Duration) (release func(), waited, ok bool) {
	if q == nil {
		return func() {}, false, true
	}
	q.once.Do(func() { q.turn = make(chan struct{}, 1) })
	select {
	case q.turn <- struct{}{}:
		return func() { <-q.turn }, false, true
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case q.turn <- struct{}{}:
		return func() { <-q.turn }, true, true
	case <-ctx.Done():
	case <-t.C:
	}
	return nil, true, false
}

// declines returns how many calls of tool the person declined in a row.
func (q *asking) declines(tool string) int {
	if q == nil {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.declined[tool]
}

// decided counts d for tool: a decline or dismissal adds one to the row, an acceptance ends it.
func (q *asking) decided(tool string, d Decision) {
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	switch d {
	case Declined, Cancelled:
		if q.declined == nil {
			q.declined = map[string]int{}
		}
		q.declined[tool]++
	case Accepted:
		delete(q.declined, tool)
	}
}

// approval is one call at the approval step.
type approval struct {
	turn      *upstream.Turn
	tool      *upstream.Tool
	args      json.RawMessage
	meter     *budget.Meter // nil: nothing is recorded
	log       *slog.Logger
	inProgram bool
	// seq is the call's number on the execution's tape (0: none).
	seq int
	// asking is the execution's question state (nil: a direct call, asked at once).
	asking *asking
	// unaskedLogged counts the execution's unasked decisions logged so far (nil: log every
	// one): a program looping on a call nobody can approve gets loggedUnasked lines, then
	// one saying the rest are only counted (the result's approvals.unasked, the ledger's
	// times).
	unaskedLogged *atomic.Int64
}

// loggedUnasked is how many unasked decisions of one execution are logged one by one, as
// many as the ledger records one by one (budget.RecordedRefusals).
const loggedUnasked = budget.RecordedRefusals

// approve is the approval step of a call (docs/design.md §12.2, hop 5): the policy's word on the
// call's arguments (an argument rule may deny it), then, when the call needs a person's
// approval, the question, its answer and both records. The call may proceed when the returned
// error is nil, under callID when that is not empty (the id its approval record names).
func (a *Approvals) approve(ctx context.Context, c approval) (d Decision, callID string, _ *failure.Error) {
	reasons, fe := c.turn.Approval(c.tool, c.args)
	if fe != nil || len(reasons) == 0 {
		return NotNeeded, "", fe
	}
	name := c.tool.Name
	why := strings.Join(reasons, "; ")
	ask := budget.ApprovalAsk{ID: budget.NewID("a_"), CallID: budget.NewID("c_"), Tool: name, Reason: why}
	q := Question{Tool: name, Reasons: reasons, InProgram: c.inProgram, Wait: a.timeout(), Seq: c.seq}
	var by string
	defer func() { c.logDecision(d, q, ask, by); a.reportDecision(d) }()

	// unasked refuses the call without asking, recorded unasked (summarised past the first
	// few: budget.RecordedRefusals).
	unasked := func(kind failure.Kind, format string, args ...any) (Decision, string, *failure.Error) {
		ask.Status = budget.ApprovalUnasked
		c.record(ctx, ask)
		return Unasked, "", failure.New(kind, format, args...)
	}
	var cannot string
	if a == nil || a.Asker == nil {
		cannot = "nothing connects it to a person"
	} else if ok, w := a.Asker.CanAsk(); !ok {
		cannot = w
	} else if dl, ok := ctx.Deadline(); ok && time.Until(dl)-approvalMargin < q.Wait {
		q.Wait = time.Until(dl) - approvalMargin
		if q.Wait < minApprovalWait {
			cannot = "the program's wall clock has too little time left to wait for an answer"
		}
	}
	if cannot != "" {
		return unasked(failure.ApprovalRequiredInProgram,
			"%s needs a person's approval (%s), and this host cannot ask for it: %s; it was not called", name, why, cannot)
	}
	// A question shows everything that decides it, or is not asked.
	view, incomplete := c.tool.ApprovalView(c.args, maxQuestionArguments)
	if incomplete != "" {
		return unasked(failure.ApprovalRequiredInProgram,
			"%s needs a person's approval (%s), and a question could not show its arguments in full: %s; nobody was asked and it was not called",
			name, why, incomplete)
	}
	q.Arguments = view
	q.Redacted = c.tool.RedactArguments(c.args, maxRedactedArguments) // for the asker only
	// One question of an execution at a time: the others wait their turn within their own
	// approval wait, so a program cannot pile questions on the person.
	deadline := time.Now().Add(q.Wait)
	release, waited, ok := c.asking.wait(ctx, q.Wait)
	if !ok {
		if ctx.Err() != nil {
			return unasked(failure.Cancelled,
				"the call of %s was cancelled while it waited to ask for a person's approval; it was not called", name)
		}
		return unasked(failure.ApprovalRequiredInProgram,
			"%s needs a person's approval (%s), and another question of this program stayed open for the whole wait (%s); nobody was asked and it was not called",
			name, why, q.Wait.Round(time.Second))
	}
	defer release()
	if n := c.asking.declines(name); n >= maxDeclinesInARow {
		return unasked(failure.Denied,
			"the person declined the last %d calls of %s in this program, so it is refused without asking again; it was not called", n, name)
	}
	if waited {
		q.Wait = time.Until(deadline)
	}
	if waited && q.Wait < minApprovalWait {
		return unasked(failure.ApprovalRequiredInProgram,
			"%s needs a person's approval (%s), and too little of the wait was left after other questions of this program; nobody was asked and it was not called",
			name, why)
	}
	ask.Status = budget.ApprovalPending
	if err := c.record(ctx, ask); err != nil {
		return Failed, "", failure.Wrap(failure.UpstreamError, err,
			"the request for approval of %s could not be recorded, so nobody was asked and it was not called", name)
	}
	actx, cancel := context.WithTimeout(ctx, q.Wait)
	ans, err := a.Asker.Ask(actx, q)
	lapsed := errors.Is(actx.Err(), context.DeadlineExceeded) && !errors.Is(ctx.Err(), context.Canceled)
	cancel()
	d, by = decision(ans, err, lapsed), ans.By
	c.asking.decided(name, d)
	if err != nil && d == Failed {
		c.log.Warn("approval question failed", "tool", name, "err", err)
	}
	if c.meter != nil {
		derr := c.meter.DecideApproval(ctx, budget.ApprovalDecision{ID: ask.ID, Status: budget.ApprovalStatus(d), AnsweredBy: ans.By})
		if derr != nil && d == Accepted {
			// Accepted but not recorded (or recorded unknown by a survivor after this process
			// stalled): the call is not made without its approval in the ledger.
			return Failed, "", failure.Wrap(failure.UpstreamError, derr,
				"the approval of %s could not be recorded, so it was not called", name)
		}
		if derr != nil {
			c.log.Error("approval decision not recorded", "approval", ask.ID, "err", derr)
		}
	}
	switch d {
	case Accepted:
		return d, ask.CallID, nil
	case Declined:
		return d, "", failure.New(failure.Denied, "the person declined the call of %s; it was not called", name)
	case Cancelled:
		return d, "", failure.New(failure.Denied, "the person dismissed the request to approve %s without accepting it; it was not called", name)
	case TimedOut:
		return d, "", failure.New(failure.ApprovalRequiredInProgram,
			"nobody answered the request for approval of %s within %s; it was not called", name, q.Wait.Round(time.Second))
	}
	if ctx.Err() != nil {
		return d, "", failure.New(failure.Cancelled, "the call of %s was cancelled while it waited for a person's approval; it was not called", name)
	}
	return d, "", failure.New(failure.ApprovalRequiredInProgram,
		"the request for approval of %s got no answer from the host; it was not called", name)
}

// decision reads an answer, or what ended the wait without one: the deadline (lapsed), or
// anything else.
func decision(ans Answer, err error, lapsed bool) Decision {
	switch {
	case err == nil && ans.Action == AnswerAccept:
		return Accepted
	case err == nil && ans.Action == AnswerDecline:
		return Declined
	case err == nil && ans.Action == AnswerCancel:
		return Cancelled
	case err != nil && lapsed:
		return TimedOut
	}
	return Failed
}

// reportDecision counts one decision for the operator.
func (a *Approvals) reportDecision(d Decision) {
	if a != nil && d != NotNeeded {
		a.Report.Approval(string(d))
	}
}

func (a *Approvals) timeout() time.Duration {
	if a == nil || a.Timeout <= 0 {
		return DefaultApprovalTimeout
	}
	return a.Timeout
}

// record writes ask through the meter, if any; a failure of an unasked record is logged only
// (the call is refused anyway).
func (c approval) record(ctx context.Context, ask budget.ApprovalAsk) error {
	if c.meter == nil {
		return nil
	}
	err := c.meter.AskApproval(ctx, ask)
	if err != nil && ask.Status == budget.ApprovalUnasked {
		c.log.Error("approval refusal not recorded", "tool", ask.Tool, "err", err)
	}
	return err
}

// logDecision is the operator's line for every decision, with the arguments redacted and cut
// for a log (upstream.Tool.RedactArguments), not in full as the person saw them.
func (c approval) logDecision(d Decision, q Question, ask budget.ApprovalAsk, by string) {
	if d == NotNeeded {
		return
	}
	if d == Unasked && c.unaskedLogged != nil {
		switch n := c.unaskedLogged.Add(1); {
		case n == loggedUnasked+1:
			c.log.Info("approval: further unasked decisions of this execution are counted, not logged", "tool", q.Tool,
				"logged", loggedUnasked)
			return
		case n > loggedUnasked:
			return
		}
	}
	c.log.Info("approval", "tool", q.Tool, "decision", string(d), "approval", ask.ID, "reason", ask.Reason,
		"arguments", c.tool.RedactArguments(c.args, maxShownArguments), "in_program", q.InProgram, "answered_by", by)
}
