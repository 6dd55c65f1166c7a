package budget_test

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/budget/ledgertest"
	"github.com/mcp-sandbox/mcp-sandbox/budget/sqlite"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
)

func TestNarrow(t *testing.T) {
	profile := budget.Limits{MaxCalls: 200, MaxTotalBytes: 8 << 20, MaxProducedBytes: 64 << 20,
		MaxPreservedBytes: 64 << 20, MaxArgumentBytes: 256 << 10, MaxResultBytes: 1 << 20}
	tests := []struct {
		name       string
		a, b, want budget.Limits
	}{
		{"empty policy narrows nothing", profile, budget.Limits{}, profile},
		{"empty profile takes policy", budget.Limits{}, budget.Limits{MaxCalls: 3}, budget.Limits{MaxCalls: 3}},
		{"policy lowers", profile, budget.Limits{MaxCalls: 3, MaxResultBytes: 10},
			func() budget.Limits { l := profile; l.MaxCalls, l.MaxResultBytes = 3, 10; return l }()},
		{"policy cannot raise", profile, budget.Limits{MaxCalls: 1000, MaxTotalBytes: 1 << 40}, profile},
		{"negative is ignored", budget.Limits{MaxCalls: 5}, budget.Limits{MaxCalls: -1}, budget.Limits{MaxCalls: 5}},
	}
	for _, tc := range tests {
		if d := cmp.Diff(tc.want, tc.a.Narrow(tc.b)); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
		if d := cmp.Diff(tc.want, tc.b.Narrow(tc.a)); d != "" {
			t.Errorf("%s, reversed (-want +got):\n%s", tc.name, d)
		}
	}
	if err := (budget.Limits{MaxResultBytes: -1}).Validate(); err == nil {
		t.Error("negative limit validated")
	}
	if err := profile.Validate(); err != nil {
		t.Error(err)
	}
}

func newMeter(t *testing.T, l budget.Ledger, run budget.RunRef, limits budget.Limits) *budget.Meter {
	t.Helper()
	m, err := budget.Start(t.Context(), l, run, "", "", limits)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestAdmitIsExact: 64 goroutines race against max_calls 10; exactly 10 are admitted, and a
// second execution of the same Run is refused at once while a new Run starts fresh.
func TestAdmitIsExact(t *testing.T) {
	l := openLedger(t, t.TempDir())
	run := budget.RunRef{Tenant: "t", ID: "r"}
	limits := budget.Limits{MaxCalls: 10}
	m := newMeter(t, l, run, limits)
	var ok, exceeded atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 64 {
		wg.Go(func() {
			<-start
			tk, fe := m.Admit(t.Context(), budget.Call{Tool: "srv__t", ArgumentBytes: 2})
			if fe != nil {
				if fe.Kind != failure.BudgetExceeded {
					t.Errorf("Admit: %v", fe)
				}
				exceeded.Add(1)
				return
			}
			ok.Add(1)
			if err := tk.Finish(t.Context(), budget.CallFinish{Status: budget.Succeeded, Usage: budget.Usage{TransferBytes: 1}}); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	if ok.Load() != 10 || exceeded.Load() != 54 {
		t.Fatalf("admitted %d, refused %d; want 10 and 54", ok.Load(), exceeded.Load())
	}
	exec, runU, err := m.Usage(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := budget.Usage{Calls: 10, TransferBytes: 10}
	if exec != want || runU != want {
		t.Errorf("usage = %+v / %+v, want %+v", exec, runU, want)
	}
	if _, err := m.End(t.Context(), "completed", nil, telemetry.Context{}); err != nil {
		t.Fatal(err)
	}
	if _, fe := m.Admit(t.Context(), budget.Call{Tool: "srv__t"}); fe == nil {
		t.Error("a call was admitted after End")
	}

	second := newMeter(t, l, run, limits)
	if _, fe := second.Admit(t.Context(), budget.Call{Tool: "srv__t"}); fe == nil || fe.Kind != failure.BudgetExceeded {
		t.Errorf("second execution of a spent Run: %v, want budget_exceeded", fe)
	}
	fresh := newMeter(t, l, budget.RunRef{Tenant: "t", ID: "r2"}, limits)
	if _, fe := fresh.Admit(t.Context(), budget.Call{Tool: "srv__t"}); fe != nil {
		t.Errorf("a new Run: %v", fe)
	}
}

// TestAdmitExactAcrossMeters: two executions of one Run, through two opens of the ledger
// (as two processes would), race for the Run's allowance.
func TestAdmitExactAcrossMeters(t *testing.T) {
	dir := t.TempDir()
	a, b := openLedger(t, dir), openLedger(t, dir)
	run := budget.RunRef{Tenant: "t", ID: "r"}
	ma := newMeter(t, a, run, budget.Limits{MaxCalls: 10})
	mb := newMeter(t, b, run, budget.Limits{MaxCalls: 10})
	var ok atomic.Int64
	var wg sync.WaitGroup
	for i := range 64 {
		m := ma
		if i%2 == 1 {
			m = mb
		}
		wg.Go(func() {
			if tk, fe := m.Admit(t.Context(), budget.Call{Tool: "x"}); fe == nil {
				ok.Add(1)
				_ = tk.Finish(t.Context(), budget.CallFinish{Status: budget.Succeeded})
			}
		})
	}
	wg.Wait()
	if ok.Load() != 10 {
		t.Errorf("admitted %d across two meters, want 10", ok.Load())
	}
}

func TestAdmitRefusals(t *testing.T) {
	tests := []struct {
		name   string
		limits budget.Limits
		before budget.CallFinish // the outcome of a first, admitted call
		call   budget.Call
		kind   failure.Kind // "" when the second call is admitted
	}{
		{"argument too large", budget.Limits{MaxArgumentBytes: 10}, budget.CallFinish{Status: budget.Succeeded}, budget.Call{ArgumentBytes: 11}, failure.ArgumentTooLarge},
		{"argument at ceiling", budget.Limits{MaxArgumentBytes: 10}, budget.CallFinish{Status: budget.Succeeded}, budget.Call{ArgumentBytes: 10}, ""},
		{"transfer spent", budget.Limits{MaxTotalBytes: 5}, budget.CallFinish{Status: budget.Succeeded, Usage: budget.Usage{TransferBytes: 5}}, budget.Call{}, failure.BudgetExceeded},
		{"produced spent", budget.Limits{MaxProducedBytes: 5}, budget.CallFinish{Status: budget.Failed, Usage: budget.Usage{ProducedBytes: 9}}, budget.Call{}, failure.BudgetExceeded},
		{"preserved spent", budget.Limits{MaxPreservedBytes: 5}, budget.CallFinish{Status: budget.Succeeded, Usage: budget.Usage{PreservedBytes: 5}}, budget.Call{}, failure.BudgetExceeded},
		{"aborted call is spent", budget.Limits{MaxCalls: 1}, budget.CallFinish{Status: budget.Aborted}, budget.Call{}, failure.BudgetExceeded},
		{"within budget", budget.Limits{MaxCalls: 2, MaxTotalBytes: 5}, budget.CallFinish{Status: budget.Succeeded, Usage: budget.Usage{TransferBytes: 4}}, budget.Call{}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := openLedger(t, t.TempDir())
			m := newMeter(t, l, budget.RunRef{Tenant: "t", ID: "r"}, tc.limits)
			tk, fe := m.Admit(t.Context(), budget.Call{Tool: "a"})
			if fe != nil {
				t.Fatal(fe)
			}
			if err := tk.Finish(t.Context(), tc.before); err != nil {
				t.Fatal(err)
			}
			tc.call.Tool = "b"
			_, fe = m.Admit(t.Context(), tc.call)
			var got failure.Kind
			if fe != nil {
				got = fe.Kind
			}
			if got != tc.kind {
				t.Fatalf("kind = %q (%v), want %q", got, fe, tc.kind)
			}
			if fe != nil {
				// The refusal is recorded and not spent.
				_, runU, _ := m.Usage(t.Context())
				if runU.Calls != 1 {
					t.Errorf("run calls = %d, want 1", runU.Calls)
				}
			}
		})
	}
}

func TestFinishOnce(t *testing.T) {
	l := openLedger(t, t.TempDir())
	m := newMeter(t, l, budget.RunRef{Tenant: "t", ID: "r"}, budget.Limits{})
	tk, fe := m.Admit(t.Context(), budget.Call{Tool: "a"})
	if fe != nil {
		t.Fatal(fe)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // a cancelled request must still be recorded
	if err := tk.Finish(ctx, budget.CallFinish{Status: budget.Aborted, Usage: budget.Usage{ProducedBytes: 3}}); err != nil {
		t.Fatal(err)
	}
	if err := tk.Finish(t.Context(), budget.CallFinish{Status: budget.Succeeded, Usage: budget.Usage{ProducedBytes: 100}}); err != nil {
		t.Fatal(err)
	}
	rec, err := l.Call(t.Context(), tk.ID())
	if err != nil || rec.Status != budget.Aborted || rec.Usage.ProducedBytes != 3 {
		t.Errorf("record = %+v, %v", rec, err)
	}
	if exec, _, _ := m.Usage(t.Context()); exec.ProducedBytes != 3 {
		t.Errorf("execution produced = %d, want 3", exec.ProducedBytes)
	}
}

// TestSeenCountsAnswered: a call's bytes count in Seen once its answer is handed over
// (Answered), before tool_call_finished lands, and once only after it has.
func TestSeenCountsAnswered(t *testing.T) {
	l := openLedger(t, t.TempDir())
	m := newMeter(t, l, budget.RunRef{Tenant: "t", ID: "r"}, budget.Limits{})
	tk, fe := m.Admit(t.Context(), budget.Call{Tool: "a"})
	if fe != nil {
		t.Fatal(fe)
	}
	o := budget.CallFinish{Status: budget.Succeeded, Usage: budget.Usage{TransferBytes: 40, ProducedBytes: 50}}
	tk.Answered(budget.CallFinish{Status: budget.Succeeded, Usage: budget.Usage{ProducedBytes: 7}})
	tk.Answered(o) // a second note replaces the first
	want := budget.Usage{Calls: 1, TransferBytes: 40, ProducedBytes: 50}
	if exec, run := m.Seen(); exec != want || run.TransferBytes != 40 || run.ProducedBytes != 50 {
		t.Errorf("seen before the finish: execution %+v, run %+v; want %+v", exec, run, want)
	}
	if err := tk.Finish(t.Context(), o); err != nil {
		t.Fatal(err)
	}
	tk.Answered(o) // after the finish: nothing more
	if exec, run := m.Seen(); exec != want || run.TransferBytes != 40 || run.ProducedBytes != 50 {
		t.Errorf("seen after the finish: execution %+v, run %+v; want %+v once", exec, run, want)
	}
}

func TestTransferAllowance(t *testing.T) {
	l := openLedger(t, t.TempDir())
	tests := []struct {
		name   string
		limits budget.Limits
		charge int64
		want   int64
	}{
		{"unset", budget.Limits{}, 0, math.MaxInt64},
		{"per-call ceiling", budget.Limits{MaxResultBytes: 100, MaxTotalBytes: 1000}, 0, 100},
		{"what is left", budget.Limits{MaxResultBytes: 100, MaxTotalBytes: 1000}, 950, 50},
		{"spent", budget.Limits{MaxTotalBytes: 1000}, 1200, 0},
	}
	for i, tc := range tests {
		m := newMeter(t, l, budget.RunRef{Tenant: "t", ID: string(rune('a' + i))}, tc.limits)
		if err := m.Charge(t.Context(), budget.Usage{TransferBytes: tc.charge}); err != nil {
			t.Fatal(err)
		}
		if got := m.TransferAllowance(); got != tc.want {
			t.Errorf("%s: allowance = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestRestartKeepsRunAllowance: a Meter started on a reopened ledger sees the Run's usage.
func TestRestartKeepsRunAllowance(t *testing.T) {
	dir := t.TempDir()
	run := budget.RunRef{Tenant: "t", ID: "r"}
	l := openLedger(t, dir)
	m := newMeter(t, l, run, budget.Limits{MaxCalls: 3, MaxTotalBytes: 100})
	for range 2 {
		tk, fe := m.Admit(t.Context(), budget.Call{Tool: "a"})
		if fe != nil {
			t.Fatal(fe)
		}
		_ = tk.Finish(t.Context(), budget.CallFinish{Status: budget.Succeeded, Usage: budget.Usage{TransferBytes: 30}})
	}
	l.Close()
	l2 := openLedger(t, dir)
	m2 := newMeter(t, l2, run, budget.Limits{MaxCalls: 3, MaxTotalBytes: 100})
	if got := m2.TransferAllowance(); got != 40 {
		t.Errorf("allowance after restart = %d, want 40", got)
	}
	if _, fe := m2.Admit(t.Context(), budget.Call{Tool: "a"}); fe != nil {
		t.Fatal(fe)
	}
	if _, fe := m2.Admit(t.Context(), budget.Call{Tool: "a"}); fe == nil || fe.Kind != failure.BudgetExceeded {
		t.Errorf("fourth call of the Run: %v, want budget_exceeded", fe)
	}
}

func TestDirectCallsAreRecorded(t *testing.T) {
	l := openLedger(t, t.TempDir())
	run := budget.RunRef{Tenant: "t", ID: "r"}
	d := budget.Direct(l, run)
	tk, fe := d.Admit(t.Context(), budget.Call{Tool: "srv__t", ArgumentBytes: 1 << 30})
	if fe != nil {
		t.Fatal(fe)
	}
	if err := tk.Finish(t.Context(), budget.CallFinish{Status: budget.Succeeded, Usage: budget.Usage{ProducedBytes: 5}}); err != nil {
		t.Fatal(err)
	}
	rec, err := l.Call(t.Context(), tk.ID())
	if err != nil || rec.ExecutionID != "" || rec.Status != budget.Succeeded {
		t.Errorf("record = %+v, %v", rec, err)
	}
	if u, _ := l.RunUsage(t.Context(), run); u != (budget.Usage{}) {
		t.Errorf("run usage = %+v, want zero: direct calls are not binding calls", u)
	}
}

func TestAdmitCancelled(t *testing.T) {
	l := openLedger(t, t.TempDir())
	m := newMeter(t, l, budget.RunRef{Tenant: "t", ID: "r"}, budget.Limits{MaxCalls: 1})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, fe := m.Admit(ctx, budget.Call{Tool: "a"}); fe == nil || fe.Kind != failure.Cancelled {
		t.Fatalf("Admit under a cancelled context: %v", fe)
	}
	if _, fe := m.Admit(t.Context(), budget.Call{Tool: "a"}); fe != nil {
		t.Errorf("a cancelled admission spent the budget: %v", fe)
	}
}

// openLedger opens a SQLite ledger in dir, closed when t ends.
func openLedger(t *testing.T, dir string) *sqlite.Ledger {
	t.Helper()
	l, err := sqlite.Open(t.Context(), dir, nil)
	return ledgertest.Opened(t, l, err)
}
