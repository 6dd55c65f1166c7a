package ledgertest

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
)

// RunLedgerContract is the behaviour every Ledger implementation must show. newLedger returns
// a fresh, empty ledger; reopen returns a second handle on the same store as l, as another
// process would open it (nil when the implementation cannot, which skips those cases).
// Implementations close what they return via t.Cleanup.
func RunLedgerContract(t *testing.T, newLedger func(t *testing.T) budget.Ledger, reopen func(t *testing.T, l budget.Ledger) budget.Ledger) {
	t.Run("StartedCallIsSpentAndCounted", func(t *testing.T) { contractSpent(t, newLedger(t)) })
	t.Run("FinishChargesBytes", func(t *testing.T) { contractFinish(t, newLedger(t)) })
	t.Run("RunLimitsRefuse", func(t *testing.T) { contractRunLimits(t, newLedger(t)) })
	t.Run("RunsAreKeyedByTenant", func(t *testing.T) { contractTenants(t, newLedger(t)) })
	t.Run("DirectCallsRecordedNotMetered", func(t *testing.T) { contractDirect(t, newLedger(t)) })
	t.Run("ConcurrentStartsAreExact", func(t *testing.T) { l := newLedger(t); contractConcurrent(t, l, l, 64, 10) })
	t.Run("RunsAndExecutions", func(t *testing.T) { contractLifecycle(t, newLedger(t)) })
	t.Run("ContextSummedPerRun", func(t *testing.T) { contractContext(t, newLedger(t)) })
	t.Run("RecoverLeavesLiveCalls", func(t *testing.T) {
		l := newLedger(t)
		contractRecoverLive(t, l, l, "this ledger's own")
	})
	t.Run("ApprovalsAreRecorded", func(t *testing.T) { contractApprovals(t, newLedger(t)) })
	t.Run("RefusalsAreBoundedAndExact", func(t *testing.T) { contractRefusalLoop(t, newLedger(t)) })
	t.Run("CassettesKeptAndSwept", func(t *testing.T) { l := newLedger(t); contractCassettes(t, l, l) })
	t.Run("ObservedShapesMerged", func(t *testing.T) { l := newLedger(t); contractShapes(t, l, l) })
	t.Run("ObservedShapesBounded", func(t *testing.T) { contractShapeBound(t, newLedger(t)) })
	t.Run("ExecutionsReadBack", func(t *testing.T) { l := newLedger(t); contractExecutions(t, l, l) })
	t.Run("LazyFinishFlushed", func(t *testing.T) { contractLazy(t, newLedger(t)) })
	t.Run("TasksKeptPerTenant", func(t *testing.T) { contractTasks(t, newLedger(t)) })
	t.Run("PendingPausesFiltered", func(t *testing.T) { contractPendingFiltered(t, newLedger(t)) })
	t.Run("FreshOwnerHoldsItsCalls", func(t *testing.T) { contractHold(t, newLedger(t)) })
	t.Run("PlansApprovedAndCovered", func(t *testing.T) { l := newLedger(t); contractPlans(t, l, l) })
	t.Run("ProgramsSavedAndReplaced", func(t *testing.T) { l := newLedger(t); contractPrograms(t, l, l) })
	if reopen == nil {
		return
	}
	t.Run("CassettesShared", func(t *testing.T) {
		a := newLedger(t)
		contractCassettes(t, a, reopen(t, a))
	})
	t.Run("ObservedShapesShared", func(t *testing.T) {
		a := newLedger(t)
		contractShapes(t, a, reopen(t, a))
	})
	t.Run("ExecutionsShared", func(t *testing.T) {
		a := newLedger(t)
		contractExecutions(t, a, reopen(t, a))
	})
	t.Run("ProgramsShared", func(t *testing.T) {
		a := newLedger(t)
		contractPrograms(t, a, reopen(t, a))
	})
	t.Run("PlansShared", func(t *testing.T) {
		a := newLedger(t)
		contractPlans(t, a, reopen(t, a))
	})
	t.Run("RecoverPendingApproval", func(t *testing.T) { contractApprovalCrash(t, newLedger(t), reopen) })
	t.Run("RecoverLostTask", func(t *testing.T) { contractTaskCrash(t, newLedger(t), reopen) })
	t.Run("PausesKeptAnsweredAndClaimedOnce", func(t *testing.T) { contractPauses(t, newLedger(t), reopen) })
	t.Run("SecondOpenerShares", func(t *testing.T) {
		a := newLedger(t)
		contractConcurrent(t, a, reopen(t, a), 64, 10)
	})
	t.Run("RecoverAfterCrash", func(t *testing.T) { contractCrash(t, newLedger(t), reopen) })
	t.Run("SurvivorsRecoverOnce", func(t *testing.T) { contractSurvivors(t, newLedger(t), reopen) })
	t.Run("RunRecoveryWatches", func(t *testing.T) { contractWatch(t, newLedger(t), reopen) })
	t.Run("RecoverSparesOtherLiveOpener", func(t *testing.T) {
		a := newLedger(t)
		contractRecoverLive(t, a, reopen(t, a), "a second live opener's, and the first is alive")
	})
}

// Call is a call of tool srv__tool with 10 bytes of arguments, for tests to start.
func Call(id string, run budget.RunRef, exec string) budget.CallStart {
	return budget.CallStart{ID: id, Run: run, ExecutionID: exec, Tool: "srv__tool", ArgumentBytes: 10}
}

// StartExecution starts execution exec of run in l.
func StartExecution(t *testing.T, l budget.Ledger, run budget.RunRef, exec string) {
	t.Helper()
	if _, err := l.StartExecution(t.Context(), run, exec, "sha256:test"); err != nil {
		t.Fatal(err)
	}
}

// Usage is the Run's usage, read from l.
func Usage(t *testing.T, l budget.Ledger, run budget.RunRef) budget.Usage {
	t.Helper()
	u, err := l.RunUsage(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func contractSpent(t *testing.T, l budget.Ledger) {
	ctx := t.Context()
	run := budget.RunRef{Tenant: "t", ID: "r"}
	StartExecution(t, l, run, "x1")
	after, err := l.StartCall(ctx, Call("c1", run, "x1"), budget.Limits{MaxCalls: 5})
	if err != nil {
		t.Fatal(err)
	}
	if after.Calls != 1 {
		t.Errorf("usage after start = %+v, want 1 call", after)
	}
	rec, err := l.Call(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	want := budget.CallRecord{CallStart: Call("c1", run, "x1"), Status: budget.Started, Spent: true, Usage: budget.Usage{Calls: 1}, Times: 1}
	if d := cmp.Diff(want, rec, cmpopts.IgnoreFields(budget.CallRecord{}, "StartedAt")); d != "" {
		t.Errorf("record (-want +got):\n%s", d)
	}
	if rec.StartedAt.IsZero() {
		t.Error("StartedAt is zero")
	}
	if _, err := l.StartCall(ctx, Call("c1", run, "x1"), budget.Limits{}); err == nil {
		t.Error("a duplicate call id was accepted")
	}
	if _, err := l.Call(ctx, "nope"); !errors.Is(err, budget.ErrNotFound) {
		t.Errorf("Call(unknown) = %v, want ErrNotFound", err)
	}
}

func contractFinish(t *testing.T, l budget.Ledger) {
	ctx := t.Context()
	run := budget.RunRef{Tenant: "t", ID: "r"}
	StartExecution(t, l, run, "x1")
	for _, id := range []string{"a", "b"} {
		if _, err := l.StartCall(ctx, Call(id, run, "x1"), budget.Limits{}); err != nil {
			t.Fatal(err)
		}
	}
	att := json.RawMessage(`[{"name":"result","handle":"h_1","size":9}]`)
	if err := l.FinishCall(ctx, budget.CallFinish{ID: "a", Status: budget.Succeeded, Attachments: att,
		Usage: budget.Usage{Calls: 7, TransferBytes: 100, ProducedBytes: 1000, PreservedBytes: 900}}); err != nil {
		t.Fatal(err)
	}
	if err := l.FinishCall(ctx, budget.CallFinish{ID: "b", Status: budget.Failed, Kind: "tool_error", Message: "boom",
		Usage: budget.Usage{ProducedBytes: 5}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Charge(ctx, run, "x1", budget.Usage{TransferBytes: 20, PreservedBytes: 1}); err != nil {
		t.Fatal(err)
	}
	want := budget.Usage{Calls: 2, TransferBytes: 120, ProducedBytes: 1005, PreservedBytes: 901}
	if d := cmp.Diff(want, Usage(t, l, run)); d != "" {
		t.Errorf("run usage (-want +got):\n%s", d)
	}
	// The next execution's start answers the Run's usage as RunUsage reads it.
	if u, err := l.StartExecution(ctx, run, "x2", ""); err != nil || u != want {
		t.Errorf("StartExecution = %+v, %v; want the Run's usage %+v", u, err, want)
	}
	if u, err := l.StartExecution(ctx, budget.RunRef{Tenant: "t", ID: "new"}, "y1", ""); err != nil || u != (budget.Usage{}) {
		t.Errorf("StartExecution of a new Run = %+v, %v; want nothing used", u, err)
	}
	rec, _ := l.Call(ctx, "a")
	if rec.Status != budget.Succeeded || rec.FinishedAt.IsZero() || string(rec.Attachments) != string(att) {
		t.Errorf("record a = %+v", rec)
	}
	if rec, _ := l.Call(ctx, "b"); rec.Status != budget.Failed || rec.Kind != "tool_error" || rec.Message != "boom" {
		t.Errorf("record b = %+v", rec)
	}
	tests := []struct {
		name string
		fin  budget.CallFinish
		want error
	}{
		{"again", budget.CallFinish{ID: "a", Status: budget.Succeeded}, budget.ErrAlreadyFinished},
		{"unknown id", budget.CallFinish{ID: "zz", Status: budget.Succeeded}, budget.ErrNotFound},
	}
	for _, tc := range tests {
		if err := l.FinishCall(ctx, tc.fin); !errors.Is(err, tc.want) {
			t.Errorf("%s: FinishCall = %v, want %v", tc.name, err, tc.want)
		}
	}
	for _, st := range []budget.CallStatus{budget.Started, budget.Unknown, "weird"} {
		if err := l.FinishCall(ctx, budget.CallFinish{ID: "zz", Status: st}); err == nil {
			t.Errorf("FinishCall with status %q accepted", st)
		}
	}
	if err := l.Charge(ctx, run, "", budget.Usage{Calls: 1}); err == nil {
		t.Error("Charge counted a call")
	}
}

func contractRunLimits(t *testing.T, l budget.Ledger) {
	ctx := t.Context()
	tests := []struct {
		name   string
		limits budget.Limits
		spend  budget.Usage // charged after one call
		admit  bool         // whether a second call is admitted
	}{
		{"calls", budget.Limits{MaxCalls: 1}, budget.Usage{}, false},
		{"calls left", budget.Limits{MaxCalls: 2}, budget.Usage{}, true},
		{"transfer", budget.Limits{MaxTotalBytes: 100}, budget.Usage{TransferBytes: 100}, false},
		{"transfer left", budget.Limits{MaxTotalBytes: 100}, budget.Usage{TransferBytes: 99}, true},
		{"produced", budget.Limits{MaxProducedBytes: 10}, budget.Usage{ProducedBytes: 11}, false},
		{"preserved", budget.Limits{MaxPreservedBytes: 10}, budget.Usage{PreservedBytes: 10}, false},
		{"unset", budget.Limits{}, budget.Usage{TransferBytes: 1 << 40}, true},
	}
	for i, tc := range tests {
		run := budget.RunRef{Tenant: "t", ID: tc.name}
		x := string(rune('a' + i))
		StartExecution(t, l, run, x)
		if _, err := l.StartCall(ctx, Call(x+"1", run, x), tc.limits); err != nil {
			t.Fatalf("%s: first call: %v", tc.name, err)
		}
		u := tc.spend
		if err := l.FinishCall(ctx, budget.CallFinish{ID: x + "1", Status: budget.Succeeded, Usage: u}); err != nil {
			t.Fatal(err)
		}
		_, err := l.StartCall(ctx, Call(x+"2", run, x), tc.limits)
		if got := err == nil; got != tc.admit {
			t.Errorf("%s: second call admitted = %v (%v), want %v", tc.name, got, err, tc.admit)
		}
		if !tc.admit {
			if k := failure.KindOf(err); k != failure.BudgetExceeded {
				t.Errorf("%s: kind = %s, want %s", tc.name, k, failure.BudgetExceeded)
			}
			rec, err := l.Call(ctx, x+"2")
			if err != nil || rec.Status != budget.Refused || rec.Spent || rec.Kind != string(failure.BudgetExceeded) {
				t.Errorf("%s: refused call record = %+v, %v", tc.name, rec, err)
			}
			if got := Usage(t, l, run).Calls; got != 1 {
				t.Errorf("%s: run calls = %d, want 1 (a refusal is not spent)", tc.name, got)
			}
		}
	}
}

func contractTenants(t *testing.T, l budget.Ledger) {
	ctx := t.Context()
	a, b := budget.RunRef{Tenant: "a", ID: "r"}, budget.RunRef{Tenant: "b", ID: "r"}
	StartExecution(t, l, a, "xa")
	StartExecution(t, l, b, "xb")
	if _, err := l.StartCall(ctx, Call("ca", a, "xa"), budget.Limits{MaxCalls: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.StartCall(ctx, Call("cb", b, "xb"), budget.Limits{MaxCalls: 1}); err != nil {
		t.Fatalf("tenant b's run shares tenant a's budget: %v", err)
	}
	if u := Usage(t, l, budget.RunRef{Tenant: "c", ID: "r"}); u != (budget.Usage{}) {
		t.Errorf("usage of a run never seen = %+v", u)
	}
}

func contractDirect(t *testing.T, l budget.Ledger) {
	ctx := t.Context()
	run := budget.RunRef{Tenant: "t", ID: "r"}
	if _, err := l.StartCall(ctx, Call("d1", run, ""), budget.Limits{MaxCalls: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.StartCall(ctx, Call("d2", run, ""), budget.Limits{MaxCalls: 1}); err != nil {
		t.Fatalf("direct calls are not metered by the binding budget: %v", err)
	}
	if err := l.FinishCall(ctx, budget.CallFinish{ID: "d1", Status: budget.Succeeded, Usage: budget.Usage{ProducedBytes: 5}}); err != nil {
		t.Fatal(err)
	}
	if u := Usage(t, l, run); u != (budget.Usage{}) {
		t.Errorf("run usage after direct calls = %+v, want zero", u)
	}
	if rec, err := l.Call(ctx, "d2"); err != nil || rec.Status != budget.Started || !rec.Spent {
		t.Errorf("direct call record = %+v, %v", rec, err)
	}
}

// contractConcurrent races n starts, half through a and half through b (which may be the
// same store opened twice), against max_calls k: exactly k are admitted.
func contractConcurrent(t *testing.T, a, b budget.Ledger, n, k int) {
	ctx := t.Context()
	run := budget.RunRef{Tenant: "t", ID: "race"}
	StartExecution(t, a, run, "x1")
	var mu sync.Mutex
	var ok, no int
	var wg sync.WaitGroup
	for i := range n {
		l := a
		if i%2 == 1 {
			l = b
		}
		wg.Go(func() {
			_, err := l.StartCall(ctx, Call(budget.NewID("c_"), run, "x1"), budget.Limits{MaxCalls: k})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case failure.KindOf(err) == failure.BudgetExceeded:
				no++
			default:
				t.Errorf("StartCall: %v", err)
			}
		})
	}
	wg.Wait()
	if ok != k || no != n-k {
		t.Errorf("admitted %d, refused %d; want %d and %d", ok, no, k, n-k)
	}
	if got := Usage(t, b, run).Calls; got != int64(k) {
		t.Errorf("run calls = %d, want %d", got, k)
	}
}

func contractLifecycle(t *testing.T, l budget.Ledger) {
	ctx := t.Context()
	run := budget.RunRef{Tenant: "t", ID: "r"}
	if err := l.StartRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	if err := l.StartRun(ctx, run); err != nil {
		t.Fatalf("starting a run twice: %v", err)
	}
	StartExecution(t, l, run, "x1")
	if _, err := l.StartExecution(ctx, run, "x1", ""); err == nil {
		t.Error("an execution id was reused")
	}
	if _, err := l.EndExecution(ctx, budget.ExecutionEnd{ID: "x1", Status: "completed", Attachments: json.RawMessage(`[]`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.EndExecution(ctx, budget.ExecutionEnd{ID: "nope", Status: "completed"}); !errors.Is(err, budget.ErrNotFound) {
		t.Errorf("EndExecution(unknown) = %v, want ErrNotFound", err)
	}
	if err := l.EndRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	if err := l.EndRun(ctx, budget.RunRef{Tenant: "t", ID: "nope"}); !errors.Is(err, budget.ErrNotFound) {
		t.Errorf("EndRun(unknown) = %v, want ErrNotFound", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// The context economy is kept per execution and summed per Run over its ended executions; an
// execution ended twice counts once, with its last figures, and Runs are keyed by tenant.
func contractContext(t *testing.T, l budget.Ledger) {
	ctx := t.Context()
	run, other := budget.RunRef{Tenant: "t", ID: "r"}, budget.RunRef{Tenant: "u", ID: "r"}
	if c, err := l.RunContext(ctx, run); err != nil || c != (telemetry.Context{}) {
		t.Fatalf("RunContext(never seen) = %+v, %v; want zero", c, err)
	}
	StartExecution(t, l, run, "x1")
	StartExecution(t, l, run, "x2")
	StartExecution(t, l, run, "x3") // still running: not counted yet
	StartExecution(t, l, other, "y1")
	// Each end answers the Run's context economy with itself counted.
	end := func(id string, c, want telemetry.Context) {
		t.Helper()
		if got, err := l.EndExecution(ctx, budget.ExecutionEnd{ID: id, Status: "completed", Context: c}); err != nil || got != want {
			t.Fatalf("EndExecution(%s) = %+v, %v; want %+v", id, got, err, want)
		}
	}
	end("x1", telemetry.Context{BindingBytes: 1000, ReturnedBytes: 100, KeptOutBytes: 900}, telemetry.Context{BindingBytes: 1000, ReturnedBytes: 100, KeptOutBytes: 900})
	end("x2", telemetry.Context{BindingBytes: 5, ReturnedBytes: 50}, telemetry.Context{BindingBytes: 1005, ReturnedBytes: 150, KeptOutBytes: 900})
	want := telemetry.Context{BindingBytes: 1010, ReturnedBytes: 160, KeptOutBytes: 900}
	end("x2", telemetry.Context{BindingBytes: 10, ReturnedBytes: 60}, want) // the last end stands
	end("y1", telemetry.Context{BindingBytes: 7, ReturnedBytes: 1, KeptOutBytes: 6}, telemetry.Context{BindingBytes: 7, ReturnedBytes: 1, KeptOutBytes: 6})
	if c, err := l.RunContext(ctx, run); err != nil || c != want {
		t.Fatalf("RunContext = %+v, %v; want %+v", c, err, want)
	}
	if c, err := l.RunContext(ctx, other); err != nil || c != (telemetry.Context{BindingBytes: 7, ReturnedBytes: 1, KeptOutBytes: 6}) {
		t.Fatalf("RunContext(other tenant) = %+v, %v", c, err)
	}
}

// contractRecoverLive starts a call on owner and recovers through by (owner itself, or a
// second opener of its store): the call's opener is alive, so nothing is recovered and the
// call stays started. whose says whose call it is to by.
func contractRecoverLive(t *testing.T, owner, by budget.Ledger, whose string) {
	ctx := t.Context()
	run := budget.RunRef{Tenant: "t", ID: "r"}
	StartExecution(t, owner, run, "x1")
	if _, err := owner.StartCall(ctx, Call("c1", run, "x1"), budget.Limits{}); err != nil {
		t.Fatal(err)
	}
	got, err := by.Recover(ctx)
	if err != nil || len(got) != 0 {
		t.Fatalf("Recover = %v, %v; want nothing: the call in flight is %s", got, err, whose)
	}
	if rec, _ := owner.Call(ctx, "c1"); rec.Status != budget.Started {
		t.Fatalf("status = %s, want started", rec.Status)
	}
}

// contractCrash starts a call, drops the ledger without finishing it, reopens the store and
// recovers: the call is unknown, still counted, and recovered once.
func contractCrash(t *testing.T, l budget.Ledger, reopen func(t *testing.T, l budget.Ledger) budget.Ledger) {
	ctx := t.Context()
	run := budget.RunRef{Tenant: "t", ID: "r"}
	StartExecution(t, l, run, "x1")
	for _, id := range []string{"done", "inflight"} {
		if _, err := l.StartCall(ctx, Call(id, run, "x1"), budget.Limits{MaxCalls: 2}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.FinishCall(ctx, budget.CallFinish{ID: "done", Status: budget.Succeeded}); err != nil {
		t.Fatal(err)
	}
	l2 := reopen(t, l)
	if err := l.Close(); err != nil { // the "kill": nothing finishes the in-flight call
		t.Fatal(err)
	}
	got, err := l2.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "inflight" || got[0].Status != budget.Unknown || !got[0].Spent || got[0].FinishedAt.IsZero() {
		t.Fatalf("Recover = %+v, want the in-flight call, unknown", got)
	}
	if rec, _ := l2.Call(ctx, "done"); rec.Status != budget.Succeeded {
		t.Errorf("finished call became %s", rec.Status)
	}
	if u := Usage(t, l2, run); u.Calls != 2 {
		t.Errorf("run calls after recovery = %d, want 2: an unknown call is spent", u.Calls)
	}
	if _, err := l2.StartCall(ctx, Call("next", run, "x1"), budget.Limits{MaxCalls: 2}); failure.KindOf(err) != failure.BudgetExceeded {
		t.Errorf("a restarted host got a fresh allowance: %v", err)
	}
	if again, err := l2.Recover(ctx); err != nil || len(again) != 0 {
		t.Errorf("second Recover = %v, %v; want nothing", again, err)
	}
	if err := l2.FinishCall(ctx, budget.CallFinish{ID: "inflight", Status: budget.Succeeded}); !errors.Is(err, budget.ErrAlreadyFinished) {
		t.Errorf("finishing an unknown call = %v, want ErrAlreadyFinished", err)
	}
}

// contractSurvivors: an owner dies with a call in flight while three others live on, and all
// three recover at once: the call is recorded unknown exactly once, by one of them.
func contractSurvivors(t *testing.T, dead budget.Ledger, reopen func(t *testing.T, l budget.Ledger) budget.Ledger) {
	ctx := t.Context()
	run := budget.RunRef{Tenant: "t", ID: "r"}
	StartExecution(t, dead, run, "x1")
	if _, err := dead.StartCall(ctx, Call("inflight", run, "x1"), budget.Limits{}); err != nil {
		t.Fatal(err)
	}
	survivors := []budget.Ledger{reopen(t, dead), reopen(t, dead), reopen(t, dead)}
	if err := dead.Close(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []budget.CallRecord
	var wg sync.WaitGroup
	for _, s := range survivors {
		wg.Go(func() {
			lost, err := s.Recover(ctx)
			if err != nil {
				t.Errorf("Recover: %v", err)
			}
			mu.Lock()
			got = append(got, lost...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(got) != 1 || got[0].ID != "inflight" || got[0].Status != budget.Unknown {
		t.Errorf("survivors recovered %+v; want the in-flight call once", got)
	}
	if u := Usage(t, survivors[0], run); u.Calls != 1 {
		t.Errorf("run calls = %d, want 1", u.Calls)
	}
}

// contractWatch: RunRecovery, left running in a survivor, records a call of an owner that
// dies after the survivor started (not only at startup), and reports it once.
func contractWatch(t *testing.T, dead budget.Ledger, reopen func(t *testing.T, l budget.Ledger) budget.Ledger) {
	ctx, cancel := context.WithCancel(t.Context())
	survivor := reopen(t, dead)
	reports := make(chan []budget.CallRecord, 16)
	var wg sync.WaitGroup
	wg.Go(func() {
		budget.RunRecovery(ctx, survivor, 20*time.Millisecond, func(lost []budget.CallRecord, err error) {
			if err != nil {
				t.Errorf("recovery pass: %v", err)
			}
			reports <- lost
		})
	})
	defer func() { cancel(); wg.Wait() }()
	time.Sleep(100 * time.Millisecond) // a few passes with nothing to do
	run := budget.RunRef{Tenant: "t", ID: "r"}
	StartExecution(t, dead, run, "x1")
	if _, err := dead.StartCall(ctx, Call("inflight", run, "x1"), budget.Limits{}); err != nil {
		t.Fatal(err)
	}
	if err := dead.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case lost := <-reports:
		if len(lost) != 1 || lost[0].ID != "inflight" || lost[0].Status != budget.Unknown {
			t.Errorf("reported %+v; want the in-flight call", lost)
		}
	case <-time.After(gate.Scaled(30 * time.Second)):
		t.Fatal("the call of an owner that died was never recovered")
	}
	time.Sleep(100 * time.Millisecond)
	select {
	case lost := <-reports:
		t.Errorf("reported again: %+v", lost)
	default:
	}
}

// contractApprovals: an approval is asked pending and decided once, with who answered; one
// refused unasked is decided at once; none spends anything; a Run lists its own only.
func contractApprovals(t *testing.T, l budget.Ledger) {
	ctx := t.Context()
	run := budget.RunRef{Tenant: "t", ID: "r"}
	StartExecution(t, l, run, "x1")
	ask := budget.ApprovalAsk{ID: "a1", Run: run, ExecutionID: "x1", CallID: "c1", Tool: "srv__wipe", Reason: "destructive", Status: budget.ApprovalPending, Times: 1}
	if err := l.AskApproval(ctx, ask); err != nil {
		t.Fatal(err)
	}
	if err := l.AskApproval(ctx, budget.ApprovalAsk{ID: "a0", Run: run, CallID: "c0", Tool: "srv__wipe", Status: budget.ApprovalAccepted}); err == nil {
		t.Error("an approval was asked already accepted")
	}
	if err := l.AskApproval(ctx, budget.ApprovalAsk{ID: "a0", Run: run, CallID: "c0", Tool: "srv__wipe", Status: budget.ApprovalPending, Times: 2}); err == nil {
		t.Error("a pending approval stood for two calls: only unasked ones are summarised")
	}
	if err := l.AskApproval(ctx, budget.ApprovalAsk{ID: "a2", Run: run, CallID: "c2", Tool: "srv__wipe", Reason: "destructive", Status: budget.ApprovalUnasked}); err != nil {
		t.Fatal(err)
	}
	if err := l.AskApproval(ctx, budget.ApprovalAsk{ID: "a3", Run: budget.RunRef{Tenant: "u", ID: "r"}, CallID: "c3", Tool: "srv__wipe", Status: budget.ApprovalPending}); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Recover(ctx); err != nil || len(got) != 0 {
		t.Errorf("Recover = %v, %v; want nothing: the approval is this ledger's own, pending", got, err)
	}
	recs, err := l.Approvals(ctx, run)
	if err != nil || len(recs) != 2 || recs[0].ID != "a1" || recs[0].Status != budget.ApprovalPending || !recs[0].DecidedAt.IsZero() ||
		recs[0].AskedAt.IsZero() || recs[1].ID != "a2" || recs[1].Status != budget.ApprovalUnasked || recs[1].DecidedAt.IsZero() {
		t.Fatalf("Approvals = %+v, %v; want a1 pending, a2 unasked and decided", recs, err)
	}
	if diff := cmp.Diff(ask, recs[0].ApprovalAsk); diff != "" {
		t.Errorf("recorded ask differs (-want +got):\n%s", diff)
	}
	if err := l.DecideApproval(ctx, budget.ApprovalDecision{ID: "a1", Status: budget.ApprovalPending}); err == nil {
		t.Error("pending decided an approval")
	}
	if err := l.DecideApproval(ctx, budget.ApprovalDecision{ID: "a1", Status: budget.ApprovalAccepted, AnsweredBy: "ann@example"}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []budget.ApprovalDecision{{ID: "a1", Status: budget.ApprovalDeclined}, {ID: "a2", Status: budget.ApprovalAccepted}} {
		if err := l.DecideApproval(ctx, d); !errors.Is(err, budget.ErrAlreadyFinished) {
			t.Errorf("DecideApproval(%+v) = %v, want ErrAlreadyFinished", d, err)
		}
	}
	if err := l.DecideApproval(ctx, budget.ApprovalDecision{ID: "nope", Status: budget.ApprovalDeclined}); !errors.Is(err, budget.ErrNotFound) {
		t.Errorf("DecideApproval(unknown) = %v, want ErrNotFound", err)
	}
	recs, _ = l.Approvals(ctx, run)
	if len(recs) != 2 || recs[0].Status != budget.ApprovalAccepted || recs[0].AnsweredBy != "ann@example" || recs[0].DecidedAt.Before(recs[0].AskedAt) {
		t.Errorf("after the decision: %+v", recs)
	}
	if u := Usage(t, l, run); u != (budget.Usage{}) {
		t.Errorf("approvals spent %+v; an approval spends nothing", u)
	}
	if recs, err := l.Approvals(ctx, budget.RunRef{Tenant: "t", ID: "other"}); err != nil || len(recs) != 0 {
		t.Errorf("Approvals(other run) = %v, %v", recs, err)
	}
}

// contractApprovalCrash: an owner dies while a person is being asked; a survivor records the
// approval unknown, which can then never be accepted, and leaves its own pending one alone.
func contractApprovalCrash(t *testing.T, dead budget.Ledger, reopen func(t *testing.T, l budget.Ledger) budget.Ledger) {
	ctx := t.Context()
	run := budget.RunRef{Tenant: "t", ID: "r"}
	if err := dead.AskApproval(ctx, budget.ApprovalAsk{ID: "a1", Run: run, CallID: "c1", Tool: "srv__wipe", Status: budget.ApprovalPending}); err != nil {
		t.Fatal(err)
	}
	survivor := reopen(t, dead)
	if err := survivor.AskApproval(ctx, budget.ApprovalAsk{ID: "a2", Run: run, CallID: "c2", Tool: "srv__wipe", Status: budget.ApprovalPending}); err != nil {
		t.Fatal(err)
	}
	if err := dead.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := survivor.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := survivor.Approvals(ctx, run)
	if err != nil || len(recs) != 2 || recs[0].Status != budget.ApprovalUnknown || recs[0].DecidedAt.IsZero() || recs[1].Status != budget.ApprovalPending {
		t.Fatalf("Approvals after recovery = %+v, %v; want a1 unknown, a2 still pending", recs, err)
	}
	if err := survivor.DecideApproval(ctx, budget.ApprovalDecision{ID: "a1", Status: budget.ApprovalAccepted}); !errors.Is(err, budget.ErrAlreadyFinished) {
		t.Errorf("accepting an approval recorded unknown = %v, want ErrAlreadyFinished", err)
	}
	if _, err := survivor.Call(ctx, "c1"); !errors.Is(err, budget.ErrNotFound) {
		t.Errorf("the call of an unknown approval was recorded: %v", err)
	}
}

// FinishLazilyThenFlush finishes call id lazily (failed) with no write after it, and flushes
// until the finish returns: Flush commits it, and a read sees it.
func FinishLazilyThenFlush(t *testing.T, l budget.Ledger, id string) {
	t.Helper()
	ctx := t.Context()
	done := make(chan error, 1)
	go func() {
		done <- l.FinishCallLater(ctx, budget.CallFinish{ID: id, Status: budget.Failed, Kind: "tool_error"})
	}()
	for {
		if err := l.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			if rec, err := l.Call(ctx, id); err != nil || rec.Status != budget.Failed {
				t.Fatalf("%s = %+v, %v", id, rec, err)
			}
			return
		case <-time.After(time.Millisecond):
		}
	}
}

// contractLazy: a call finished lazily with no write after it is committed by a Flush, and a
// read sees it.
func contractLazy(t *testing.T, l budget.Ledger) {
	run := budget.RunRef{Tenant: "t", ID: "r"}
	StartExecution(t, l, run, "x1")
	if _, err := l.StartCall(t.Context(), Call("c1", run, "x1"), budget.Limits{}); err != nil {
		t.Fatal(err)
	}
	FinishLazilyThenFlush(t, l, "c1")
}

// contractHold: a ledger just opened surely holds its calls (budget.Ticket.SurelyOpen): its
// hold was taken before now and lapses after it.
func contractHold(t *testing.T, l budget.Ledger) {
	StartExecution(t, l, budget.RunRef{Tenant: "t", ID: "r"}, "x1") // an owner that has written
	now := time.Now()
	if until, since := l.LeaseHeldUntil(), l.LeaseHeldSince(); !now.Before(until) || since.After(now) {
		t.Errorf("a fresh owner's hold: since %v, until %v; want taken before %v and lapsing after it", since, until, now)
	}
}
