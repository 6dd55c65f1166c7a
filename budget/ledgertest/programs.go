package ledgertest

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

// contractPrograms: a saved program is kept per tenant and name, replaced whole by a new
// version, listed by name, deleted once, and its runs recorded; another handle (co) sees the
// same, and another tenant sees none of it.
func contractPrograms(t *testing.T, cl, co budget.Ledger) {
	ctx := t.Context()
	p := budget.SavedProgram{Tenant: "t", Name: "refund", Version: "sha256:1", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`),
		Code: "async def main(): pass", SavedBy: "operator"}
	if err := cl.PutProgram(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := cl.PutProgram(ctx, budget.SavedProgram{Tenant: "t", Name: "audit", Agent: "a", Version: "sha256:2", InputSchema: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	p.Version, p.Code = "sha256:3", "async def main(): return 3"
	if err := cl.PutProgram(ctx, p); err != nil {
		t.Fatal(err)
	}
	got, err := co.SavedProgram(ctx, "t", "refund")
	if err != nil || got.Version != "sha256:3" || got.Code != p.Code || string(got.InputSchema) != `{"type":"object"}` || got.SavedAt.IsZero() {
		t.Fatalf("SavedProgram = %+v, %v", got, err)
	}
	if _, err := co.SavedProgram(ctx, "u", "refund"); !errors.Is(err, budget.ErrNotFound) {
		t.Errorf("another tenant's SavedProgram = %v, want ErrNotFound", err)
	}
	list, err := co.SavedPrograms(ctx, "t")
	if err != nil || len(list) != 2 || list[0].Name != "audit" || list[0].Agent != "a" || list[1].Name != "refund" {
		t.Fatalf("SavedPrograms = %+v, %v", list, err)
	}
	if list, err := co.SavedPrograms(ctx, "u"); err != nil || list == nil || len(list) != 0 {
		t.Errorf("another tenant's SavedPrograms = %v, %v; want an empty list", list, err)
	}
	if err := cl.NoteProgramRun(ctx, "t", budget.ProgramRun{ExecutionID: "x1", Name: "refund", Version: "sha256:3"}); err != nil {
		t.Fatal(err)
	}
	runs, err := co.ProgramRuns(ctx, "t", "refund")
	if err != nil || len(runs) != 1 || runs[0].ExecutionID != "x1" || runs[0].Version != "sha256:3" {
		t.Errorf("ProgramRuns = %+v, %v", runs, err)
	}
	if err := co.DeleteProgram(ctx, "t", "refund"); err != nil {
		t.Fatal(err)
	}
	if err := cl.DeleteProgram(ctx, "t", "refund"); !errors.Is(err, budget.ErrNotFound) {
		t.Errorf("second DeleteProgram = %v, want ErrNotFound", err)
	}
}
