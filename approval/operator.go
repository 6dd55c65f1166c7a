package approval

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

// The operator's path (docs/design.md §10, §11): the questions a store keeps, listed and
// decided outside any MCP client, by `mcp-sandbox approvals` and by the serving port's route
// /v1/approvals. A decision is the pause's answer, recorded once; the process whose call
// waits on it sees it at once when it is this one (Room.Decide), else within its Room's Poll.
//
// An operator decides on what the person was asked: the question's view of the arguments
// (Question.Arguments, kept with the pause as budget.Pause.View), every key path with its
// value in full, never the log line's cut form. A pause kept without that view (by an older
// version) is shown without arguments and can be denied, not approved (ErrNotShown).

// Entry is a question as the operator's path shows it: a line of `approvals list`, a route's
// answer, a webhook's notice.
type Entry struct {
	ID     string `json:"id"`
	Tenant string `json:"tenant"`
	Agent  string `json:"agent"`
	Tool   string `json:"tool"`
	// Arguments are the arguments as the person was shown them: one line "path = value" per
	// key path, each value in full as JSON, and a last line "Not shown: ..." naming the values
	// the tool's schema marks secret. "" when NotShown says why they are not kept.
	Arguments string `json:"arguments"`
	// NotShown says why the arguments are not shown, when they are not: such an approval can
	// be denied, never approved.
	NotShown  string    `json:"not_shown,omitempty"`
	Reason    string    `json:"reason"`
	AskedAt   time.Time `json:"asked_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// Resumable: should the process holding it be gone, a client's retry carries the call on
	// in another process.
	Resumable  bool   `json:"resumable"`
	Status     string `json:"status"`
	AnsweredBy string `json:"answered_by,omitempty"`
}

// EntryOf is p as the operator's path shows it.
func EntryOf(p budget.Pause) Entry {
	e := Entry{ID: p.ID, Tenant: p.Tenant, Agent: p.Agent, Tool: p.Tool, Arguments: p.View, Reason: p.Reason,
		AskedAt: p.AskedAt.UTC(), ExpiresAt: p.Expires.UTC(), Resumable: p.Resumable, Status: string(p.Status), AnsweredBy: p.AnsweredBy}
	if p.View == "" {
		e.NotShown = notShown
	}
	return e
}

// notShown is why a pause kept without its view shows no arguments.
const notShown = "the arguments were not kept in full with this approval (it was asked by an older version), so it can be denied here, not approved"

// List returns the questions still open (pending, not expired) in store, of tenant when it is
// not empty, oldest first.
func List(ctx context.Context, store budget.Pauses, tenant string) ([]Entry, error) {
	all, err := store.PendingPauses(ctx, tenant, "")
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := []Entry{}
	for _, p := range all {
		if now.Before(p.Expires) {
			out = append(out, EntryOf(p))
		}
	}
	return out, nil
}

// The refusals of Decide; each error's text says more.
var (
	ErrUnknown         = errors.New("no such approval is kept")
	ErrExpired         = errors.New("the approval expired")
	ErrAlreadyAnswered = errors.New("the approval was already answered")
	ErrNotShown        = errors.New("the approval's arguments cannot be shown in full")
)

// Decide answers question id in store as the operator: accepted when approve, else declined,
// recorded as answered by by. The first answer from any path stands.
func Decide(ctx context.Context, store budget.Pauses, id string, approve bool, by string) (budget.Pause, error) {
	status, verb := budget.ApprovalDeclined, "denying"
	if approve {
		status, verb = budget.ApprovalAccepted, "approving"
	}
	p, err := store.Pause(ctx, id)
	switch {
	case errors.Is(err, budget.ErrNotFound):
		return p, fmt.Errorf("%w: %s was never asked, or was dropped after its retention", ErrUnknown, id)
	case err != nil:
		return p, err
	case p.Status == budget.ApprovalPending && time.Now().After(p.Expires):
		return p, fmt.Errorf("%w: %s closed at %s, and the call was refused unanswered; %s it changes nothing", ErrExpired, id,
			p.Expires.UTC().Format(time.RFC3339), verb)
	case approve && p.View == "" && p.Status == budget.ApprovalPending:
		return p, fmt.Errorf("%w: %s: %s; answer it from the client that was asked, or deny it", ErrNotShown, id, notShown)
	}
	p, err = store.DecidePause(ctx, id, status, by)
	if errors.Is(err, budget.ErrAlreadyFinished) {
		who := ""
		if p.AnsweredBy != "" {
			who = " by " + p.AnsweredBy
		}
		return p, fmt.Errorf("%w: %s: %s%s at %s; a decision is final", ErrAlreadyAnswered, id, p.Status, who, p.DecidedAt.UTC().Format(time.RFC3339))
	}
	return p, err
}
