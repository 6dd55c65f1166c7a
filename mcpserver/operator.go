package mcpserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/mcp-sandbox/mcp-sandbox/approval"
)

// The operator's route (docs/design.md §10, §11): /v1/approvals on the serving port, for
// operator tokens only, over the questions package approval keeps. What an operator sees and
// what a decision does are the approval package's (approval.Entry, Room.Decide); here is only
// the HTTP: who may, and which status says what.

// approvalRoutes serves /v1/approvals for operator tokens: GET lists the pending approvals,
// POST /v1/approvals/{id}/approve and /deny decide one (as "operator" and, when the body is
// {"by": "..."}, who): 404 unknown, 410 expired, 409 already answered, 422 an approval whose
// arguments cannot be shown approved. A tenant's token, or none, is refused.
func (h *httpHandler) approvalRoutes(mux *http.ServeMux, room *approval.Room) {
	authed := func(next func(w http.ResponseWriter, r *http.Request)) http.Handler {
		return h.operatorOnly(64<<10, next)
	}
	mux.Handle("GET /v1/approvals", authed(func(w http.ResponseWriter, r *http.Request) {
		list, err := room.List(r.Context(), r.URL.Query().Get("tenant"))
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
			p, err := room.Decide(r.Context(), r.PathValue("id"), approve, by)
			switch {
			case errors.Is(err, approval.ErrUnknown):
				http.Error(w, err.Error(), http.StatusNotFound)
			case errors.Is(err, approval.ErrExpired):
				http.Error(w, err.Error(), http.StatusGone)
			case errors.Is(err, approval.ErrAlreadyAnswered):
				http.Error(w, err.Error(), http.StatusConflict)
			case errors.Is(err, approval.ErrNotShown):
				http.Error(w, err.Error(), http.StatusUnprocessableEntity)
			case err != nil:
				h.opts.Logger.Error("approval not decided", "err", err)
				http.Error(w, "the ledger could not record the decision", http.StatusInternalServerError)
			default:
				h.opts.Logger.Info("approval decided by the operator's route", "approval", p.ID, "tenant", p.Tenant, "tool", p.Tool, "answer", p.Status)
				writeJSON(w, http.StatusOK, approval.EntryOf(p))
			}
		})
	}
	mux.Handle("POST /v1/approvals/{id}/approve", decide(true))
	mux.Handle("POST /v1/approvals/{id}/deny", decide(false))
}

// operatorOnly admits operator tokens only (approvals.operator_tokens) to next, a route of the
// operator's (/v1/approvals, /v1/programs), with bodies of at most limit bytes. A tenant's
// token, or none, is refused.
func (h *httpHandler) operatorOnly(limit int64, next func(w http.ResponseWriter, r *http.Request)) http.Handler {
	return limitBody(limit, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := bearerToken(r)
		switch {
		case token != "" && h.opts.Operator(token):
			next(w, r)
		case token == "":
			w.Header().Set("WWW-Authenticate", `Bearer realm="mcp-sandbox-operator"`)
			http.Error(w, "unauthorized: send an operator token (approvals.operator_tokens) as Authorization: Bearer <token>", http.StatusUnauthorized)
		default:
			h.opts.Logger.Warn("operator route refused: not an operator token", "path", r.URL.Path, "remote", r.RemoteAddr)
			http.Error(w, "forbidden: "+r.URL.Path+" takes an operator token (approvals.operator_tokens); a tenant's token is not one", http.StatusForbidden)
		}
	}))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
