package budget_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
)

// A direct meter has no execution, so no end to summarise at: it records every refusal.
func TestDirectMeterRecordsEveryUnasked(t *testing.T) {
	ctx := context.Background()
	l := openLedger(t, t.TempDir())
	run := budget.RunRef{Tenant: "t", ID: "r"}
	m := budget.Direct(l, run)
	for range budget.RecordedRefusals + 2 {
		if err := m.AskApproval(ctx, budget.ApprovalAsk{ID: budget.NewID("a_"), CallID: budget.NewID("c_"), Tool: "srv__wipe", Status: budget.ApprovalUnasked}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := l.Approvals(ctx, run)
	if err != nil || len(got) != budget.RecordedRefusals+2 {
		t.Fatalf("Approvals = %d records, %v; want %d", len(got), err, budget.RecordedRefusals+2)
	}
}

// refuseFails is a ledger whose RefuseCall fails while failing is set.
type refuseFails struct {
	budget.Ledger
	failing bool
}

func (l *refuseFails) RefuseCall(ctx context.Context, r budget.Refusal) error {
	if l.failing {
		return errors.New("the disk is full")
	}
	return l.Ledger.RefuseCall(ctx, r)
}

// A refusal whose own record fails is counted into the execution's summary instead, and a
// summary that fails is still counted for End's error: the ledger's sum stays exact while it
// can write at all.
func TestRefusalNotRecordedIsSummarised(t *testing.T) {
	ctx := context.Background()
	l := &refuseFails{Ledger: openLedger(t, t.TempDir())}
	run := budget.RunRef{Tenant: "t", ID: "r"}
	m, err := budget.Start(ctx, l, run, "x1", "sha256:test", budget.Limits{MaxArgumentBytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	const n = budget.RecordedRefusals + 5
	for i := range n {
		l.failing = i == 1 // the second refusal's own record fails
		_, fe := m.Admit(ctx, budget.Call{Tool: "srv__big", ArgumentBytes: 100})
		if fe == nil || fe.Kind != failure.ArgumentTooLarge || (i == 1) != (fe.Err != nil) {
			t.Fatalf("refusal %d: %+v", i, fe)
		}
	}
	if _, err := m.End(ctx, "completed", nil, telemetry.Context{}); err != nil {
		t.Fatal(err)
	}
	calls, err := l.Calls(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, c := range calls {
		sum += max(c.Times, 1)
	}
	if sum != n {
		t.Errorf("the ledger's records stand for %d refusals, want %d", sum, n)
	}
}
