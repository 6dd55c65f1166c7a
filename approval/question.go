package approval

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

// Question is what a person is asked about one call.
type Question struct {
	// ID names the question wherever it goes: its pause in the Room's store, the input request
	// a client answers, the approval an operator lists and decides. The Room sets it, and
	// Expires, when the question closes.
	ID      string
	Expires time.Time
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
	// Seq is the call's number in its program's tape, 0 for a direct call or without a tape.
	Seq int
	// Redacted are the arguments as a log line shows them (upstream.Tool.RedactArguments):
	// what a journal keeps, and a resumed call is compared by. Never what anyone decides on.
	Redacted string
	// Call is the id the call is recorded under if it is made (budget.ApprovalAsk.CallID): what
	// a plan covering it records. Plan, instead, names the plan a plan's question asks about
	// (AskPlan), and Proposal the program a proposal to save one asks about (AskSave); all ""
	// otherwise.
	Call, Plan, Proposal string
}

// Message is the text a person reads: the tool, who calls it, why it needs approval, the
// arguments, and how long the question stays open.
func (q Question) Message() string {
	var b strings.Builder
	if q.Proposal != "" {
		fmt.Fprintf(&b, "Save the program %s as a tool?\n%s.\n%s", q.Proposal, strings.Join(q.Reasons, "; "), q.Arguments)
		fmt.Fprintf(&b, "Accept to save it (a new text under a saved name replaces the old one); decline, and nothing is saved. Without an answer within %s nothing is saved.", q.Wait.Round(time.Second))
		return b.String()
	}
	if q.Plan != "" {
		fmt.Fprintf(&b, "Approve the plan %s?\n%s.\nThe calls, in order, every argument in full:\n%s", q.Plan, strings.Join(q.Reasons, "; "), q.Arguments)
		fmt.Fprintf(&b, "Accept to let exactly these calls run without asking again; any other call is asked about. Without an answer within %s nothing is approved.", q.Wait.Round(time.Second))
		return b.String()
	}
	who := "The assistant calls"
	if q.InProgram {
		who = "A program the assistant is running calls"
	}
	fmt.Fprintf(&b, "Approve one call of %s?\n%s %s, which needs your approval: %s.\n", q.Tool, who, q.Tool, strings.Join(q.Reasons, "; "))
	fmt.Fprintf(&b, "Arguments, every one in full:\n%s", q.Arguments)
	fmt.Fprintf(&b, "Accept to let this one call run; decline to refuse it. Without an answer within %s it is refused.", q.Wait.Round(time.Second))
	return b.String()
}

// QuestionOf is the question pause p keeps, as it was put: what a path that did not put it
// shows (a task's input request, read from the store by any process). A program's calls are
// numbered from 1 (Seq), a direct call's is 0. A question asked whole names its tool and keeps
// what it asks about as its redacted arguments (AskPlan: PlanTool and the plan's id; AskSave:
// SaveTool and the program's name), so that is what names its Plan or Proposal again.
func QuestionOf(p budget.Pause) Question {
	q := Question{ID: p.ID, Expires: p.Expires, Tool: p.Tool, Arguments: p.View, Reasons: []string{p.Reason},
		InProgram: p.Seq > 0, Wait: p.Expires.Sub(p.AskedAt), Seq: p.Seq, Redacted: p.Arguments}
	switch p.Tool {
	case PlanTool:
		q.Plan = p.Arguments
	case SaveTool:
		q.Proposal = p.Arguments
	}
	return q
}

// The actions an Answer carries (MCP elicitation's).
const (
	Accept  = "accept"
	Decline = "decline"
	Cancel  = "cancel"
)

// Answer is an answer to a Question, from whichever path gave it.
type Answer struct {
	// Action is Accept, Decline or Cancel.
	Action string
	// By is who answered, when the path says; "" otherwise.
	By string
}

// Valid reports whether a is an answer: its action is Accept, Decline or Cancel.
func (a Answer) Valid() bool {
	_, ok := a.status()
	return ok
}

// status is the pause status an answer records; ok is false for an action that is no answer.
func (a Answer) status() (budget.ApprovalStatus, bool) {
	switch a.Action {
	case Accept:
		return budget.ApprovalAccepted, true
	case Decline:
		return budget.ApprovalDeclined, true
	case Cancel:
		return budget.ApprovalCancelled, true
	}
	return "", false
}

// AnswerOf is the answer a decided pause records.
func AnswerOf(p budget.Pause) Answer {
	switch p.Status {
	case budget.ApprovalAccepted:
		return Answer{Action: Accept, By: p.AnsweredBy}
	case budget.ApprovalDeclined:
		return Answer{Action: Decline, By: p.AnsweredBy}
	}
	return Answer{Action: Cancel, By: p.AnsweredBy}
}

// Asker is how a question crosses to the person at the host (mcpserver's: elicitation/create
// on the session that made the call, or an input request of a call held across round
// trips). It is the one shape of every path a person answers by; the Room saves the question
// first and takes whichever answer comes first, from this path or any other.
type Asker interface {
	// CanAsk reports whether this host can ask its person at all and, when it cannot, why: a
	// phrase completing "this host cannot ask for it: ...". Nothing is sent.
	CanAsk() (ok bool, why string)
	// Ask puts q to the person until ctx ends. An Asker the person answers through returns
	// the answer (elicitation); one whose answers come back another way (a client's retry,
	// which hands them to Room.Answer) returns when ctx ends. Either way, a question
	// withdrawn because it was decided has context.Cause(ctx) ErrAnswered (through its own
	// client), ErrAnsweredElsewhere (an operator, or a retry that reached another process)
	// or ErrClaimedElsewhere (another process carries the call on: the asker's call must
	// stop). An error means no answer came through it.
	Ask(ctx context.Context, q Question) (Answer, error)
}

// Standing answers a question before anyone is asked: the recorded answer of the call a
// resumed program paused on (Once), and a plan approved once (Covered).
type Standing interface {
	// Answer is the standing answer to q, if there is one.
	Answer(ctx context.Context, q Question) (Answer, bool)
}

// Once is the standing answer a to the question of call seq of tool: given once, as a program
// run again after its pause reaches the call it paused on.
func Once(seq int, tool string, a Answer) Standing {
	return &once{seq: seq, tool: tool, ans: a}
}

type once struct {
	seq  int
	tool string
	ans  Answer
	used atomic.Bool
}

func (o *once) Answer(_ context.Context, q Question) (Answer, bool) {
	if q.Seq == o.seq && q.Tool == o.tool && o.used.CompareAndSwap(false, true) {
		return o.ans, true
	}
	return Answer{}, false
}

// Journal is what a pause keeps of a program's calls (package cassette's Journal).
type Journal interface {
	// Paused is the journal as a pause at call seq keeps it: the calls answered so far, as
	// JSON, and whether a program run again from them could reach the call (each call
	// before seq answered in order, none after it, none in flight).
	Paused(seq int) (calls json.RawMessage, resumable bool)
}
