package ledgertest

import (
	"sync"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
)

// contractRefusalLoop is a program looping on refused calls, as binding drives the Meter: in
// execution x1, 10,000 calls each of an argument too large, of a tool once the execution's
// calls are spent, and of a tool that needs an approval this host cannot ask; in x2 (started
// before x1 spent the Run, so its first refusal comes from the ledger), 10,000 calls once the
// Run is spent. Four goroutines call at once. The ledger holds the first RecordedRefusals of
// each tool and kind one by one and one summary of the rest, and the Times of the records
// sum to exactly what was refused; nothing refused is spent.
func contractRefusalLoop(t *testing.T, l budget.Ledger) {
	ctx := t.Context()
	const n, workers = 10000, 4
	run := budget.RunRef{Tenant: "t", ID: "loop"}
	limits := budget.Limits{MaxCalls: 3, MaxArgumentBytes: 100}
	x1, err := budget.Start(ctx, l, run, "x1", "sha256:test", limits)
	if err != nil {
		t.Fatal(err)
	}
	x2, err := budget.Start(ctx, l, run, "x2", "sha256:test", limits)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	kinds := map[[2]string]int64{} // execution, kind → refusals the loop saw
	admitted := 0
	loop := func(m *budget.Meter, body func(m *budget.Meter, i int) []*failure.Error) {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := w; i < n; i += workers {
					for _, fe := range body(m, i) {
						mu.Lock()
						kinds[[2]string{m.ExecutionID(), string(fe.Kind)}]++
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
	}
	admit := func(m *budget.Meter, tool string, size int64) *failure.Error {
		tk, fe := m.Admit(ctx, budget.Call{Tool: tool, ArgumentBytes: size})
		if fe == nil {
			mu.Lock()
			admitted++
			mu.Unlock()
			if err := tk.FinishLater(ctx, budget.CallFinish{Status: budget.Succeeded}); err != nil {
				t.Error(err)
			}
		}
		return fe
	}
	loop(x1, func(m *budget.Meter, i int) []*failure.Error {
		var out []*failure.Error
		for _, fe := range []*failure.Error{admit(m, "srv__big", 1000), admit(m, "srv__a", 10)} {
			if fe != nil {
				out = append(out, fe)
			}
		}
		if err := m.AskApproval(ctx, budget.ApprovalAsk{ID: budget.NewID("a_"), CallID: budget.NewID("c_"), Tool: "srv__wipe", Reason: "destructive",
			Status: budget.ApprovalUnasked}); err != nil {
			t.Error(err)
		}
		return out
	})
	if _, err := x1.End(ctx, "completed", nil, telemetry.Context{}); err != nil {
		t.Fatal(err)
	}
	loop(x2, func(m *budget.Meter, i int) []*failure.Error {
		if fe := admit(m, "srv__a", 10); fe != nil {
			return []*failure.Error{fe}
		}
		return nil
	})
	if _, err := x2.End(ctx, "completed", nil, telemetry.Context{}); err != nil {
		t.Fatal(err)
	}

	want := map[[2]string]int64{{"x1", "argument_too_large"}: n, {"x1", "budget_exceeded"}: n - 3, {"x2", "budget_exceeded"}: n}
	if admitted != 3 || len(kinds) != len(want) {
		t.Fatalf("the loop saw %d admitted and refusals %v; want 3 and %v", admitted, kinds, want)
	}
	for k, v := range want {
		if kinds[k] != v {
			t.Errorf("the loop saw %d refusals %v, want %d", kinds[k], k, v)
		}
	}
	calls, err := l.Calls(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[[2]string]int64{}
	rows := map[[2]string]int{}
	summaries := map[[2]string]int{}
	for _, c := range calls {
		if c.Status != budget.Refused {
			if !c.Spent || c.Times != 1 {
				t.Errorf("call record %+v: a started call is spent and stands for one call", c)
			}
			continue
		}
		k := [2]string{c.ExecutionID, c.Kind}
		if c.Spent || c.Usage.Calls != 0 {
			t.Errorf("refusal record %+v is spent", c)
		}
		recorded[k] += c.Times
		rows[k]++
		if c.Times > 1 {
			summaries[k]++
		}
	}
	for k, v := range want {
		if recorded[k] != v {
			t.Errorf("the ledger's records of %v stand for %d refusals, want %d", k, recorded[k], v)
		}
		// At most RecordedRefusals one by one (more only as the ledger refused calls racing
		// before this meter saw the Run spent, one per worker), and one summary.
		if rows[k] > budget.RecordedRefusals+workers+1 || summaries[k] != 1 {
			t.Errorf("%v: %d records, %d summaries; want at most %d and one", k, rows[k], summaries[k], budget.RecordedRefusals+workers+1)
		}
	}
	if len(calls) > 3+3*(budget.RecordedRefusals+workers+1) {
		t.Errorf("%d call records for 30,000 refused calls and 3 made", len(calls))
	}

	approvals, err := l.Approvals(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	var unasked int64
	for _, a := range approvals {
		if a.Status != budget.ApprovalUnasked || a.Tool != "srv__wipe" || a.Reason != "destructive" || a.ExecutionID != "x1" {
			t.Errorf("approval record %+v", a)
		}
		unasked += a.Times
	}
	if unasked != n || len(approvals) != budget.RecordedRefusals+1 {
		t.Errorf("%d approval records stand for %d unasked approvals; want %d records for %d", len(approvals), unasked,
			budget.RecordedRefusals+1, n)
	}
	if u := Usage(t, l, run); u.Calls != 3 {
		t.Errorf("run usage %+v: want 3 calls, refusals are never spent", u)
	}
}
