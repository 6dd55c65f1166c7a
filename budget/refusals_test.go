package budget

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// contractRefusalLoop is a program looping on refused calls, as binding drives the Meter: in
// execution x1, 10,000 calls each of an argument too large, of a tool once the execution's
// calls are spent, and of a tool that needs an approval this host cannot ask; in x2 (started
// before x1 spent the Run, so its first refusal comes from the ledger), 10,000 calls once the
// Run is spent. Four goroutines call at once. The ledger holds the first RecordedRefusals of
// each tool and kind one by one and one summary of the rest, and the Times of the records
// sum to exactly what was refused; nothing refused is spent.
func contractRefusalLoop(t *testing.T, l Ledger) {
	ctx := t.Context()
	const n, workers = 10000, 4
	run := RunRef{Tenant: "t", ID: "loop"}
	limits := Limits{MaxCalls: 3, MaxArgumentBytes: 100}
	x1, err := Start(ctx, l, run, "x1", "sha256:test", limits)
	if err != nil {
		t.Fatal(err)
	}
	x2, err := Start(ctx, l, run, "x2", "sha256:test", limits)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	kinds := map[[2]string]int64{} // execution, kind → refusals the loop saw
	admitted := 0
	loop := func(m *Meter, body func(m *Meter, i int) []*failure.Error) {
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
	admit := func(m *Meter, tool string, size int64) *failure.Error {
		tk, fe := m.Admit(ctx, Call{Tool: tool, ArgumentBytes: size})
		if fe == nil {
			mu.Lock()
			admitted++
			mu.Unlock()
			if err := tk.FinishLater(ctx, Outcome{Status: Succeeded}); err != nil {
				t.Error(err)
			}
		}
		return fe
	}
	loop(x1, func(m *Meter, i int) []*failure.Error {
		var out []*failure.Error
		for _, fe := range []*failure.Error{admit(m, "srv__big", 1000), admit(m, "srv__a", 10)} {
			if fe != nil {
				out = append(out, fe)
			}
		}
		if err := m.AskApproval(ctx, ApprovalAsk{ID: NewID("a_"), CallID: NewID("c_"), Tool: "srv__wipe", Reason: "destructive",
			Status: ApprovalUnasked}); err != nil {
			t.Error(err)
		}
		return out
	})
	if err := x1.End(ctx, "completed", nil, Context{}); err != nil {
		t.Fatal(err)
	}
	loop(x2, func(m *Meter, i int) []*failure.Error {
		if fe := admit(m, "srv__a", 10); fe != nil {
			return []*failure.Error{fe}
		}
		return nil
	})
	if err := x2.End(ctx, "completed", nil, Context{}); err != nil {
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
		if c.Status != Refused {
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
		if rows[k] > RecordedRefusals+workers+1 || summaries[k] != 1 {
			t.Errorf("%v: %d records, %d summaries; want at most %d and one", k, rows[k], summaries[k], RecordedRefusals+workers+1)
		}
	}
	if len(calls) > 3+3*(RecordedRefusals+workers+1) {
		t.Errorf("%d call records for 30,000 refused calls and 3 made", len(calls))
	}

	approvals, err := l.Approvals(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	var unasked int64
	for _, a := range approvals {
		if a.Status != ApprovalUnasked || a.Tool != "srv__wipe" || a.Reason != "destructive" || a.ExecutionID != "x1" {
			t.Errorf("approval record %+v", a)
		}
		unasked += a.Times
	}
	if unasked != n || len(approvals) != RecordedRefusals+1 {
		t.Errorf("%d approval records stand for %d unasked approvals; want %d records for %d", len(approvals), unasked,
			RecordedRefusals+1, n)
	}
	if u := mustUsage(t, l, run); u.Calls != 3 {
		t.Errorf("run usage %+v: want 3 calls, refusals are never spent", u)
	}
}

// A direct meter has no execution, so no end to summarise at: it records every refusal.
func TestDirectMeterRecordsEveryUnasked(t *testing.T) {
	ctx := context.Background()
	l := openSQLite(t, t.TempDir())
	run := RunRef{Tenant: "t", ID: "r"}
	m := Direct(l, run)
	for range RecordedRefusals + 2 {
		if err := m.AskApproval(ctx, ApprovalAsk{ID: NewID("a_"), CallID: NewID("c_"), Tool: "srv__wipe", Status: ApprovalUnasked}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := l.Approvals(ctx, run)
	if err != nil || len(got) != RecordedRefusals+2 {
		t.Fatalf("Approvals = %d records, %v; want %d", len(got), err, RecordedRefusals+2)
	}
}

// refuseFails is a ledger whose RefuseCall fails while failing is set.
type refuseFails struct {
	Ledger
	failing bool
}

func (l *refuseFails) RefuseCall(ctx context.Context, r Refusal) error {
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
	l := &refuseFails{Ledger: openSQLite(t, t.TempDir())}
	run := RunRef{Tenant: "t", ID: "r"}
	m, err := Start(ctx, l, run, "x1", "sha256:test", Limits{MaxArgumentBytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	const n = RecordedRefusals + 5
	for i := range n {
		l.failing = i == 1 // the second refusal's own record fails
		_, fe := m.Admit(ctx, Call{Tool: "srv__big", ArgumentBytes: 100})
		if fe == nil || fe.Kind != failure.ArgumentTooLarge || (i == 1) != (fe.Err != nil) {
			t.Fatalf("refusal %d: %+v", i, fe)
		}
	}
	if err := m.End(ctx, "completed", nil, Context{}); err != nil {
		t.Fatal(err)
	}
	calls, err := l.Calls(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, c := range calls {
		sum += times(c.Times)
	}
	if sum != n {
		t.Errorf("the ledger's records stand for %d refusals, want %d", sum, n)
	}
}
