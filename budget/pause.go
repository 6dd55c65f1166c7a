package budget

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Pause is a call (a program's, or a host's direct one) paused on a person's approval, kept in
// the ledger so that it outlives the process holding it: the question, and the program's
// journal up to it (the calls it made and the answers it was given, package cassette's lines),
// from which another process can run the program again when the answer comes
// (docs/design.md §11). The operator's channel lists and decides pauses too.
type Pause struct {
	// ID is the question's id: the input request the client answers, and the ID the operator
	// approves or denies.
	ID     string
	Tenant string
	Agent  string
	// Run is the Run the paused call belongs to, as the sealed requestState binds it; for a
	// question inside a task, "task:<id>" instead, the task's, under which its questions are
	// kept (mcpserver's taskPauseKey).
	Run string
	// Hold names the held call of the process that paused it.
	Hold string
	// Tool is the tool waiting for approval; Arguments its arguments redacted as a log line
	// shows them (what a resumed call is compared by); Reason why it needs approval.
	Tool      string
	Arguments string
	Reason    string
	// View is the arguments as the person asked was shown them, every key path with its value
	// in full (approval.Question.Arguments): what an operator decides on too. "" when the pause
	// was kept without it (by an older version), and then no operator may approve it from a
	// view that was cut (docs/design.md §11).
	View string
	// Seq is the pending call's number in the program's journal (0: a direct call).
	Seq int
	// Journal is the program's calls before the pending one, in order (JSON, package
	// cassette's Call lines); nil for a direct call.
	Journal json.RawMessage
	// Resumable is false when the program had other calls in flight at the pause: their
	// outcome is unknown, so the program is never run again from the journal.
	Resumable bool
	AskedAt   time.Time
	Expires   time.Time
	// Status is pending until someone answers: accepted, declined or cancelled.
	Status     ApprovalStatus
	AnsweredBy string
	DecidedAt  time.Time
	// Claimed says a process has taken the decision to carry on the call (the holder, or
	// one resuming from the journal): it is carried on once.
	Claimed bool
	// Owner is the ledger owner that paused it (set by SavePause): the process holding it.
	Owner string
	// Result is what the call came to after the answer, as its owner relays it to a retry
	// that reached another process (JSON; nil until then).
	Result json.RawMessage
}

// ErrHeldElsewhere is ClaimPause's refusal of a pause whose owner is another process, alive.
var ErrHeldElsewhere = errors.New("budget: the pause is held by another process, which is alive")

// AnswersPause reports whether s is an answer DecidePause records: accepted, declined or
// cancelled.
func (s ApprovalStatus) AnswersPause() bool {
	return s == ApprovalAccepted || s == ApprovalDeclined || s == ApprovalCancelled
}

// Pauses keep paused calls: a part of Ledger, which what needs only them (package approval's
// Room, the operator's channel) takes. Safe for concurrent use, and by several processes on one store.
type Pauses interface {
	// SavePause records p as pending, owned by this ledger (p.Owner is ignored).
	SavePause(ctx context.Context, p Pause) error
	// Pause returns one pause; ErrNotFound when there is none (dropped, or never kept).
	Pause(ctx context.Context, id string) (Pause, error)
	// PendingPauses returns the pauses nobody has answered, oldest first: tenant's when tenant
	// is not empty, else all tenants'; those asked under run (Pause.Run) when run is not empty.
	// The store filters, so a task's one open question is read without the rest.
	PendingPauses(ctx context.Context, tenant, run string) ([]Pause, error)
	// DecidePause answers a pending pause (accepted, declined or cancelled) once: the first
	// answer stands, and a later one gets ErrAlreadyFinished with the pause as decided.
	DecidePause(ctx context.Context, id string, status ApprovalStatus, answeredBy string) (Pause, error)
	// ClaimPause takes a decided pause for carrying on, once: by its owner, or by anyone once
	// the owner is gone (as Recover judges an owner gone); ErrHeldElsewhere while another
	// owner is alive, ErrAlreadyFinished when it was claimed before (or is still pending).
	ClaimPause(ctx context.Context, id string) error
	// SetPauseResult records what a decided pause's call came to, for a retry waiting in
	// another process; setting it again replaces it.
	SetPauseResult(ctx context.Context, id string, result json.RawMessage) error
	// DropPause forgets a pause; dropping one that is gone does nothing.
	DropPause(ctx context.Context, id string) error
	// DropPausesBefore forgets the pauses asked before t: the retention period's end.
	DropPausesBefore(ctx context.Context, t time.Time) (int, error)
}
