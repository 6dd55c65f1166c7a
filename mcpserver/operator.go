package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

// The operator's channel (docs/design.md §10, §11): the pauses the ledger keeps, listed and
// decided outside any MCP client, by `mcp-sandbox approvals` and by the HTTP route
// /v1/approvals on the serving port, which takes operator tokens only. A decision is the
// pause's answer, recorded once; the server holding the call sees it within
// Options.PausePoll.
//
// An operator decides on what the person was asked: the question's view of the arguments
// (binding.Question.Arguments, kept with the pause as budget.Pause.View), every key path with
// its value in full, never the log line's cut form. A pause kept without that view (by an
// older version) is shown without arguments and can be denied, not approved
// (ErrApprovalNotShown).

// Approval is a pause as the operator's channel shows it.
type Approval struct {
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

// ApprovalOf is p as the operator's channel shows it.
func ApprovalOf(p budget.Pause) Approval {
	a := Approval{ID: p.ID, Tenant: p.Tenant, Agent: p.Agent, Tool: p.Tool, Arguments: p.View, Reason: p.Reason,
		AskedAt: p.AskedAt.UTC(), ExpiresAt: p.Expires.UTC(), Resumable: p.Resumable, Status: string(p.Status), AnsweredBy: p.AnsweredBy}
	if p.View == "" {
		a.NotShown = notShown
	}
	return a
}

// notShown is why a pause kept without its view shows no arguments.
const notShown = "the arguments were not kept in full with this approval (it was asked by an older version), so it can be denied here, not approved"

// PendingApprovals are the pauses still open (pending, not expired), of tenant when it is not
// empty, oldest first.
func PendingApprovals(ctx context.Context, pauses budget.Pauses, tenant string) ([]Approval, error) {
	all, err := pauses.PendingPauses(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := []Approval{}
	for _, p := range all {
		if (tenant == "" || p.Tenant == tenant) && now.Before(p.Expires) {
			out = append(out, ApprovalOf(p))
		}
	}
	return out, nil
}

// The refusals of DecideApproval; each error's text says more.
var (
	ErrApprovalUnknown  = errors.New("no such approval is kept")
	ErrApprovalExpired  = errors.New("the approval expired")
	ErrApprovalAnswered = errors.New("the approval was already answered")
	ErrApprovalNotShown = errors.New("the approval's arguments cannot be shown in full")
)

// DecideApproval answers pause id as the operator: accepted when approve, else declined,
// recorded as answered by by. The first answer stands.
func DecideApproval(ctx context.Context, pauses budget.Pauses, id string, approve bool, by string) (budget.Pause, error) {
	status, verb := budget.ApprovalDeclined, "denying"
	if approve {
		status, verb = budget.ApprovalAccepted, "approving"
	}
	p, err := pauses.Pause(ctx, id)
	switch {
	case errors.Is(err, budget.ErrNotFound):
		return p, fmt.Errorf("%w: %s was never asked, or was dropped after its retention", ErrApprovalUnknown, id)
	case err != nil:
		return p, err
	case p.Status == budget.ApprovalPending && time.Now().After(p.Expires):
		return p, fmt.Errorf("%w: %s closed at %s, and the call was refused unanswered; %s it changes nothing", ErrApprovalExpired, id,
			p.Expires.UTC().Format(time.RFC3339), verb)
	case approve && p.View == "" && p.Status == budget.ApprovalPending:
		return p, fmt.Errorf("%w: %s: %s; answer it from the client that was asked, or deny it", ErrApprovalNotShown, id, notShown)
	}
	p, err = pauses.DecidePause(ctx, id, status, by)
	if errors.Is(err, budget.ErrAlreadyFinished) {
		who := ""
		if p.AnsweredBy != "" {
			who = " by " + p.AnsweredBy
		}
		return p, fmt.Errorf("%w: %s: %s%s at %s; a decision is final", ErrApprovalAnswered, id, p.Status, who, p.DecidedAt.UTC().Format(time.RFC3339))
	}
	return p, err
}

// approvalRoutes serves /v1/approvals for operator tokens: GET lists the pending approvals,
// POST /v1/approvals/{id}/approve and /deny decide one (as "operator" and, when the body is
// {"by": "..."}, who): 404 unknown, 410 expired, 409 already answered, 422 an approval whose
// arguments cannot be shown approved. A tenant's token, or none, is refused.
func (h *httpHandler) approvalRoutes(mux *http.ServeMux, pauses budget.Pauses) {
	authed := func(next func(w http.ResponseWriter, r *http.Request)) http.Handler {
		return limitBody(64<<10, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			token := bearerToken(r)
			switch {
			case token != "" && h.opts.Operator(token):
				next(w, r)
			case token == "":
				w.Header().Set("WWW-Authenticate", `Bearer realm="mcp-sandbox-operator"`)
				http.Error(w, "unauthorized: send an operator token (approvals.operator_tokens) as Authorization: Bearer <token>", http.StatusUnauthorized)
			default:
				h.opts.Logger.Warn("approvals route refused: not an operator token", "path", r.URL.Path, "remote", r.RemoteAddr)
				http.Error(w, "forbidden: /v1/approvals takes an operator token (approvals.operator_tokens); a tenant's token is not one", http.StatusForbidden)
			}
		}))
	}
	mux.Handle("GET /v1/approvals", authed(func(w http.ResponseWriter, r *http.Request) {
		list, err := PendingApprovals(r.Context(), pauses, r.URL.Query().Get("tenant"))
		if err != nil {
			h.opts.Logger.Error("approvals not listed", "err", err)
			http.Error(w, "the ledger could not be read", http.StatusInternalServerError)
			return
		}
		writeJSON(w, http.StatusOK, list)
	}))
	decide := func(approve bool) http.Handler {
		return authed(func(w http.ResponseWriter, r *http.Request) {
			var body struct {
				By string `json:"by"`
			}
			if r.ContentLength != 0 {
				d := json.NewDecoder(r.Body)
				d.DisallowUnknownFields()
				if err := d.Decode(&body); err != nil {
					http.Error(w, fmt.Sprintf(`the body is optional, and when sent is {"by": "who decides"}: %v`, err), http.StatusBadRequest)
					return
				}
			}
			by := "operator"
			if body.By != "" {
				by = "operator " + oneLine(body.By)
			}
			p, err := DecideApproval(r.Context(), pauses, r.PathValue("id"), approve, by)
			switch {
			case errors.Is(err, ErrApprovalUnknown):
				http.Error(w, err.Error(), http.StatusNotFound)
			case errors.Is(err, ErrApprovalExpired):
				http.Error(w, err.Error(), http.StatusGone)
			case errors.Is(err, ErrApprovalAnswered):
				http.Error(w, err.Error(), http.StatusConflict)
			case errors.Is(err, ErrApprovalNotShown):
				http.Error(w, err.Error(), http.StatusUnprocessableEntity)
			case err != nil:
				h.opts.Logger.Error("approval not decided", "err", err)
				http.Error(w, "the ledger could not record the decision", http.StatusInternalServerError)
			default:
				h.opts.Logger.Info("approval decided by the operator's route", "approval", p.ID, "tenant", p.Tenant, "tool", p.Tool, "answer", p.Status)
				writeJSON(w, http.StatusOK, ApprovalOf(p))
			}
		})
	}
	mux.Handle("POST /v1/approvals/{id}/approve", decide(true))
	mux.Handle("POST /v1/approvals/{id}/deny", decide(false))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
