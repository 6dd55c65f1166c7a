package budget_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// TestReserveIsExactUnderConcurrency: 64 calls racing to hand over 100 bytes each against
// max_total_bytes 1000: exactly 10 get their bytes, whatever the interleaving, and the
// execution is charged exactly 1000.
func TestReserveIsExactUnderConcurrency(t *testing.T) {
	ctx := context.Background()
	l := openLedger(t, t.TempDir())
	m, err := budget.Start(ctx, l, budget.RunRef{Tenant: "t", ID: "r"}, "", "", budget.Limits{MaxCalls: 1000, MaxTotalBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var granted atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, fe := m.Admit(ctx, budget.Call{Tool: "x__y", ArgumentBytes: 2})
			if fe != nil {
				// Once the bytes are spent, admission itself refuses: that call gets none.
				if fe.Kind != failure.BudgetExceeded {
					t.Error(fe)
				}
				return
			}
			o := budget.CallFinish{Status: budget.Succeeded, Usage: budget.Usage{ProducedBytes: 100}}
			if tk.Reserve(budget.Usage{TransferBytes: 100}) {
				granted.Add(1)
				o.Usage.TransferBytes = 100
			}
			if err := tk.Finish(ctx, o); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	exec, run, err := m.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if granted.Load() != 10 || exec.TransferBytes != 1000 || run.TransferBytes != 1000 {
		t.Fatalf("granted %d, execution transfer %d, run transfer %d; want 10, 1000, 1000", granted.Load(), exec.TransferBytes, run.TransferBytes)
	}
	if m.TransferAllowance() != 0 {
		t.Fatalf("allowance %d after the budget is spent", m.TransferAllowance())
	}
}

// RefusedMeter reads the limit back out of the refusals Admit and the ledger write.
func TestRefusedMeter(t *testing.T) {
	for _, c := range []struct{ msg, meter, half string }{
		{"the execution's binding budget is spent: max_calls (3) reached", "max_calls", "execution"},
		{"the run's binding budget is spent: max_total_bytes (100) reached", "max_total_bytes", "run"},
		{"the execution's binding budget is spent: max_preserved_bytes (5) reached", "max_preserved_bytes", "execution"},
		{"the arguments of a__b are 10 bytes, over max_argument_bytes (4)", "max_argument_bytes", "call"},
		{"the execution has ended", "", ""},
	} {
		if m, h := budget.RefusedMeter(c.msg); m != c.meter || h != c.half {
			t.Errorf("RefusedMeter(%q) = %q, %q; want %q, %q", c.msg, m, h, c.meter, c.half)
		}
	}
}
