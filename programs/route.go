package programs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

// Route is the operator's /v1/programs (docs/design.md §23) over store, once the caller has
// admitted an operator: GET /v1/programs?tenant=T lists, GET /v1/programs/{name}?tenant=T
// shows one, PUT saves the body {"code", "description", "agent"} under the name, DELETE
// removes it. 400 for a program that cannot be saved (the reason), 404 for one the tenant
// does not have.
type Route struct {
	Store budget.Programs
	Log   *slog.Logger
}

// MaxBodyBytes bounds a PUT's body: the program and its description, as JSON.
const MaxBodyBytes = 2*MaxCodeBytes + 64<<10

// List serves GET /v1/programs.
func (rt Route) List(w http.ResponseWriter, r *http.Request) {
	tenant, ok := tenantOf(w, r)
	if !ok {
		return
	}
	list, err := rt.Store.SavedPrograms(r.Context(), tenant)
	rt.reply(w, list, err)
}

// Show serves GET /v1/programs/{name}.
func (rt Route) Show(w http.ResponseWriter, r *http.Request) {
	tenant, ok := tenantOf(w, r)
	if !ok {
		return
	}
	p, err := rt.Store.SavedProgram(r.Context(), tenant, r.PathValue("name"))
	rt.reply(w, p, err)
}

// Put serves PUT /v1/programs/{name}.
func (rt Route) Put(w http.ResponseWriter, r *http.Request) {
	tenant, ok := tenantOf(w, r)
	if !ok {
		return
	}
	var body struct {
		Code        string `json:"code"`
		Description string `json:"description"`
		Agent       string `json:"agent"`
		By          string `json:"by"`
	}
	d := json.NewDecoder(io.LimitReader(r.Body, MaxBodyBytes))
	d.DisallowUnknownFields()
	if err := d.Decode(&body); err != nil {
		http.Error(w, fmt.Sprintf(`the body is {"code": "...", "description": "...", "agent": "..." (optional), "by": "..." (optional)}: %v`, err), http.StatusBadRequest)
		return
	}
	by := "operator"
	if body.By != "" {
		by = "operator " + body.By
	}
	p, err := Save(r.Context(), rt.Store, tenant, body.Agent, r.PathValue("name"), body.Code, body.Description, by)
	if err == nil {
		rt.Log.Info("program saved by the operator's route", "tenant", tenant, "program", p.Name, "version", p.Version, "agent", p.Agent)
	}
	rt.reply(w, p, err)
}

// Delete serves DELETE /v1/programs/{name}.
func (rt Route) Delete(w http.ResponseWriter, r *http.Request) {
	tenant, ok := tenantOf(w, r)
	if !ok {
		return
	}
	err := rt.Store.DeleteProgram(r.Context(), tenant, r.PathValue("name"))
	rt.reply(w, map[string]string{"deleted": r.PathValue("name")}, err)
}

func tenantOf(w http.ResponseWriter, r *http.Request) (string, bool) {
	t := r.URL.Query().Get("tenant")
	if t == "" {
		http.Error(w, "name the tenant whose programs these are: ?tenant=NAME", http.StatusBadRequest)
	}
	return t, t != ""
}

func (rt Route) reply(w http.ResponseWriter, v any, err error) {
	switch {
	case errors.Is(err, ErrInvalid):
		http.Error(w, err.Error(), http.StatusBadRequest)
	case errors.Is(err, budget.ErrNotFound):
		http.Error(w, err.Error(), http.StatusNotFound)
	case err != nil:
		rt.Log.Error("saved programs: the ledger failed", "err", err)
		http.Error(w, "the ledger could not be read or written", http.StatusInternalServerError)
	default:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
}
