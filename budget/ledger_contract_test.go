package budget

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// RunLedgerContract is the behaviour every Ledger implementation must show. newLedger returns
// a fresh, empty ledger; reopen returns a second handle on the same store as l, as another
// process would open it (nil when the implementation cannot, which skips those cases).
// Implementations close what they return via t.Cleanup.
func RunLedgerContract(t *testing.T, newLedger func(t *testing.T) Ledger, reopen func(t *testing.T, l Ledger) Ledger) {
	t.Run("StartedCallIsSpentAndCounted", func(t *testing.T) { contractSpent(t, newLedger(t)) })
	t.Run("FinishChargesBytes", func(t *testing.T) { contractFinish(t, newLedger(t)) })
	t.Run("RunLimitsRefuse", func(t *testing.T) { contractRunLimits(t, newLedger(t)) })
	t.Run("RunsAreKeyedByTenant", func(t *testing.T) { contractTenants(t, newLedger(t)) })
	t.Run("DirectCallsRecordedNotMetered", func(t *testing.T) { contractDirect(t, newLedger(t)) })
	t.Run("ConcurrentStartsAreExact", func(t *testing.T) { l := newLedger(t); contractConcurrent(t, l, l, 64, 10) })
	t.Run("RunsAndExecutions", func(t *testing.T) { contractLifecycle(t, newLedger(t)) })
	t.Run("ContextSummedPerRun", func(t *testing.T) { contractContext(t, newLedger(t)) })
	t.Run("RecoverLeavesLiveCalls", func(t *testing.T) { contractRecoverLive(t, newLedger(t)) })
	t.Run("ApprovalsAreRecorded", func(t *testing.T) { contractApprovals(t, newLedger(t)) })
	t.Run("RefusalsAreBoundedAndExact", func(t *testing.T) { contractRefusalLoop(t, newLedger(t)) })
	if reopen == nil {
		return
	}
	t.Run("RecoverPendingApproval", func(t *testing.T) { contractApprovalCrash(t, newLedger(t), reopen) })
	t.Run("SecondOpenerShares", func(t *testing.T) {
		a := newLedger(t)
		contractConcurrent(t, a, reopen(t, a), 64, 10)
	})
	t.Run("RecoverAfterCrash", func(t *testing.T) { contractCrash(t, newLedger(t), reopen) })
	t.Run("SurvivorsRecoverOnce", func(t *testing.T) { contractSurvivors(t, newLedger(t), reopen) })
	t.Run("RunRecoveryWatches", func(t *testing.T) { contractWatch(t, newLedger(t), reopen) })
	t.Run("RecoverSparesOtherLiveOpener", func(t *testing.T) {
		a := newLedger(t)
		b := reopen(t, a)
		ctx := t.Context()
		run := RunRef{Tenant: "t", ID: "r"}
		mustStartExec(t, a, run, "x1")
		if _, err := a.StartCall(ctx, call("c1", run, "x1"), Limits{}); err != nil {
			t.Fatal(err)
		}
		got, err := b.Recover(ctx)
		if err != nil || len(got) != 0 {
			t.Fatalf("Recover by a second live opener = %v, %v; want nothing: the first is alive", got, err)
		}
		if rec, _ := a.Call(ctx, "c1"); rec.Status != Started {
			t.Fatalf("status = %s, want started", rec.Status)
		}
	})
}

func call(id string, run RunRef, exec string) CallStart {
	return CallStart{ID: id, Run: run, ExecutionID: exec, Tool: "srv__tool", ArgumentBytes: 10}
}

func mustStartExec(t *testing.T, l Ledger, run RunRef, exec string) {
	t.Helper()
	if err := l.StartExecution(t.Context(), run, exec, "sha256:test"); err != nil {
		t.Fatal(err)
	}
}

func mustUsage(t *testing.T, l Ledger, run RunRef) Usage {
	t.Helper()
	u, err := l.RunUsage(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func contractSpent(t *testing.T, l Ledger) {
	ctx := t.Context()
	run := RunRef{Tenant: "t", ID: "r"}
	mustStartExec(t, l, run, "x1")
	after, err := l.StartCall(ctx, call("c1", run, "x1"), Limits{MaxCalls: 5})
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
	want := CallRecord{CallStart: call("c1", run, "x1"), Status: Started, Spent: true, Usage: Usage{Calls: 1}, Times: 1}
	if d := cmp.Diff(want, rec, cmpopts.IgnoreFields(CallRecord{}, "StartedAt")); d != "" {
		t.Errorf("record (-want +got):\n%s", d)
	}
	if rec.StartedAt.IsZero() {
		t.Error("StartedAt is zero")
	}
	if _, err := l.StartCall(ctx, call("c1", run, "x1"), Limits{}); err == nil {
		t.Error("a duplicate call id was accepted")
	}
	if _, err := l.Call(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Call(unknown) = %v, want ErrNotFound", err)
	}
}

func contractFinish(t *testing.T, l Ledger) {
	ctx := t.Context()
	run := RunRef{Tenant: "t", ID: "r"}
	mustStartExec(t, l, run, "x1")
	for _, id := range []string{"a", "b"} {
		if _, err := l.StartCall(ctx, call(id, run, "x1"), Limits{}); err != nil {
			t.Fatal(err)
		}
	}
	att := json.RawMessage(`[{"name":"result","handle":"h_1","size":9}]`)
	if err := l.FinishCall(ctx, CallFinish{ID: "a", Status: Succeeded, Attachments: att,
		Usage: Usage{Calls: 7, TransferBytes: 100, ProducedBytes: 1000, PreservedBytes: 900}}); err != nil {
		t.Fatal(err)
	}
	if err := l.FinishCall(ctx, CallFinish{ID: "b", Status: Failed, Kind: "tool_error", Message: "boom",
		Usage: Usage{ProducedBytes: 5}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Charge(ctx, run, "x1", Usage{TransferBytes: 20, PreservedBytes: 1}); err != nil {
		t.Fatal(err)
	}
	want := Usage{Calls: 2, TransferBytes: 120, ProducedBytes: 1005, PreservedBytes: 901}
	if d := cmp.Diff(want, mustUsage(t, l, run)); d != "" {
		t.Errorf("run usage (-want +got):\n%s", d)
	}
	rec, _ := l.Call(ctx, "a")
	if rec.Status != Succeeded || rec.FinishedAt.IsZero() || string(rec.Attachments) != string(att) {
		t.Errorf("record a = %+v", rec)
	}
	if rec, _ := l.Call(ctx, "b"); rec.Status != Failed || rec.Kind != "tool_error" || rec.Message != "boom" {
		t.Errorf("record b = %+v", rec)
	}
	tests := []struct {
		name string
		fin  CallFinish
		want error
	}{
		{"again", CallFinish{ID: "a", Status: Succeeded}, ErrAlreadyFinished},
		{"unknown id", CallFinish{ID: "zz", Status: Succeeded}, ErrNotFound},
	}
	for _, tc := range tests {
		if err := l.FinishCall(ctx, tc.fin); !errors.Is(err, tc.want) {
			t.Errorf("%s: FinishCall = %v, want %v", tc.name, err, tc.want)
		}
	}
	for _, st := range []CallStatus{Started, Unknown, "weird"} {
		if err := l.FinishCall(ctx, CallFinish{ID: "zz", Status: st}); err == nil {
			t.Errorf("FinishCall with status %q accepted", st)
		}
	}
	if err := l.Charge(ctx, run, "", Usage{Calls: 1}); err == nil {
		t.Error("Charge counted a call")
	}
}

func contractRunLimits(t *testing.T, l Ledger) {
	ctx := t.Context()
	tests := []struct {
		name   string
		limits Limits
		spend  Usage // charged after one call
		admit  bool  // whether a second call is admitted
	}{
		{"calls", Limits{MaxCalls: 1}, Usage{}, false},
		{"calls left", Limits{MaxCalls: 2}, Usage{}, true},
		{"transfer", Limits{MaxTotalBytes: 100}, Usage{TransferBytes: 100}, false},
		{"transfer left", Limits{MaxTotalBytes: 100}, Usage{TransferBytes: 99}, true},
		{"produced", Limits{MaxProducedBytes: 10}, Usage{ProducedBytes: 11}, false},
		{"preserved", Limits{MaxPreservedBytes: 10}, Usage{PreservedBytes: 10}, false},
		{"unset", Limits{}, Usage{TransferBytes: 1 << 40}, true},
	}
	for i, tc := range tests {
		run := RunRef{Tenant: "t", ID: tc.name}
		x := string(rune('a' + i))
		mustStartExec(t, l, run, x)
		if _, err := l.StartCall(ctx, call(x+"1", run, x), tc.limits); err != nil {
			t.Fatalf("%s: first call: %v", tc.name, err)
		}
		u := tc.spend
		if err := l.FinishCall(ctx, CallFinish{ID: x + "1", Status: Succeeded, Usage: u}); err != nil {
			t.Fatal(err)
		}
		_, err := l.StartCall(ctx, call(x+"2", run, x), tc.limits)
		if got := err == nil; got != tc.admit {
			t.Errorf("%s: second call admitted = %v (%v), want %v", tc.name, got, err, tc.admit)
		}
		if !tc.admit {
			if k := failure.KindOf(err); k != failure.BudgetExceeded {
				t.Errorf("%s: kind = %s, want %s", tc.name, k, failure.BudgetExceeded)
			}
			rec, err := l.Call(ctx, x+"2")
			if err != nil || rec.Status != Refused || rec.Spent || rec.Kind != string(failure.BudgetExceeded) {
				t.Errorf("%s: refused call record = %+v, %v", tc.name, rec, err)
			}
			if got := mustUsage(t, l, run).Calls; got != 1 {
				t.Errorf("%s: run calls = %d, want 1 (a refusal is not spent)", tc.name, got)
			}
		}
	}
}

func contractTenants(t *testing.T, l Ledger) {
	ctx := t.Context()
	a, b := RunRef{Tenant: "a", ID: "r"}, RunRef{Tenant: "b", ID: "r"}
	mustStartExec(t, l, a, "xa")
	mustStartExec(t, l, b, "xb")
	if _, err := l.StartCall(ctx, call("ca", a, "xa"), Limits{MaxCalls: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.StartCall(ctx, call("cb", b, "xb"), Limits{MaxCalls: 1}); err != nil {
		t.Fatalf("tenant b's run shares tenant a's budget: %v", err)
	}
	if u := mustUsage(t, l, RunRef{Tenant: "c", ID: "r"}); u != (Usage{}) {
		t.Errorf("usage of a run never seen = %+v", u)
	}
}

func contractDirect(t *testing.T, l Ledger) {
	ctx := t.Context()
	run := RunRef{Tenant: "t", ID: "r"}
	if _, err := l.StartCall(ctx, call("d1", run, ""), Limits{MaxCalls: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.StartCall(ctx, call("d2", run, ""), Limits{MaxCalls: 1}); err != nil {
		t.Fatalf("direct calls are not metered by the binding budget: %v", err)
	}
	if err := l.FinishCall(ctx, CallFinish{ID: "d1", Status: Succeeded, Usage: Usage{ProducedBytes: 5}}); err != nil {
		t.Fatal(err)
	}
	if u := mustUsage(t, l, run); u != (Usage{}) {
		t.Errorf("run usage after direct calls = %+v, want zero", u)
	}
	if rec, err := l.Call(ctx, "d2"); err != nil || rec.Status != Started || !rec.Spent {
		t.Errorf("direct call record = %+v, %v", rec, err)
	}
}

// contractConcurrent races n starts, half through a and half through b (which may be the
// same store opened twice), against max_calls k: exactly k are admitted.
func contractConcurrent(t *testing.T, a, b Ledger, n, k int) {
	ctx := t.Context()
	run := RunRef{Tenant: "t", ID: "race"}
	mustStartExec(t, a, run, "x1")
	var mu sync.Mutex
	var ok, no int
	var wg sync.WaitGroup
	for i := range n {
		l := a
		if i%2 == 1 {
			l = b
		}
		wg.Go(func() {
			_, err := l.StartCall(ctx, call(NewID("c_"), run, "x1"), Limits{MaxCalls: k})
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
	if got := mustUsage(t, b, run).Calls; got != int64(k) {
		t.Errorf("run calls = %d, want %d", got, k)
	}
}

func contractLifecycle(t *testing.T, l Ledger) {
	ctx := t.Context()
	run := RunRef{Tenant: "t", ID: "r"}
	if err := l.StartRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	if err := l.StartRun(ctx, run); err != nil {
		t.Fatalf("starting a run twice: %v", err)
	}
	mustStartExec(t, l, run, "x1")
	if err := l.StartExecution(ctx, run, "x1", ""); err == nil {
		t.Error("an execution id was reused")
	}
	if err := l.EndExecution(ctx, ExecutionEnd{ID: "x1", Status: "completed", Attachments: json.RawMessage(`[]`)}); err != nil {
		t.Fatal(err)
	}
	if err := l.EndExecution(ctx, ExecutionEnd{ID: "nope", Status: "completed"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("EndExecution(unknown) = %v, want ErrNotFound", err)
	}
	if err := l.EndRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	if err := l.EndRun(ctx, RunRef{Tenant: "t", ID: "nope"}); !errors.Is(err, ErrNotFound) {
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
func contractContext(t *testing.T, l Ledger) {
	ctx := t.Context()
	run, other := RunRef{Tenant: "t", ID: "r"}, RunRef{Tenant: "u", ID: "r"}
	if c, err := l.RunContext(ctx, run); err != nil || c != (Context{}) {
		t.Fatalf("RunContext(never seen) = %+v, %v; want zero", c, err)
	}
	mustStartExec(t, l, run, "x1")
	mustStartExec(t, l, run, "x2")
	mustStartExec(t, l, run, "x3") // still running: not counted yet
	mustStartExec(t, l, other, "y1")
	end := func(id string, c Context) {
		t.Helper()
		if err := l.EndExecution(ctx, ExecutionEnd{ID: id, Status: "completed", Context: c}); err != nil {
			t.Fatal(err)
		}
	}
	end("x1", Context{BindingBytes: 1000, ReturnedBytes: 100, KeptOutBytes: 900})
	end("x2", Context{BindingBytes: 5, ReturnedBytes: 50})
	end("x2", Context{BindingBytes: 10, ReturnedBytes: 60}) // the last end stands
	end("y1", Context{BindingBytes: 7, ReturnedBytes: 1, KeptOutBytes: 6})
	want := Context{BindingBytes: 1010, ReturnedBytes: 160, KeptOutBytes: 900}
	if c, err := l.RunContext(ctx, run); err != nil || c != want {
		t.Fatalf("RunContext = %+v, %v; want %+v", c, err, want)
	}
	if c, err := l.RunContext(ctx, other); err != nil || c != (Context{BindingBytes: 7, ReturnedBytes: 1, KeptOutBytes: 6}) {
		t.Fatalf("RunContext(other tenant) = %+v, %v", c, err)
	}
}

func contractRecoverLive(t *testing.T, l Ledger) {
	ctx := t.Context()
	run := RunRef{Tenant: "t", ID: "r"}
	mustStartExec(t, l, run, "x1")
	if _, err := l.StartCall(ctx, call("c1", run, "x1"), Limits{}); err != nil {
		t.Fatal(err)
	}
	got, err := l.Recover(ctx)
	if err != nil || len(got) != 0 {
		t.Errorf("Recover = %v, %v; want nothing: the call is this ledger's own, in flight", got, err)
	}
}

// contractCrash starts a call, drops the ledger without finishing it, reopens the store and
// recovers: the call is unknown, still counted, and recovered once.
func contractCrash(t *testing.T, l Ledger, reopen func(t *testing.T, l Ledger) Ledger) {
	ctx := t.Context()
	run := RunRef{Tenant: "t", ID: "r"}
	mustStartExec(t, l, run, "x1")
	for _, id := range []string{"done", "inflight"} {
		if _, err := l.StartCall(ctx, call(id, run, "x1"), Limits{MaxCalls: 2}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.FinishCall(ctx, CallFinish{ID: "done", Status: Succeeded}); err != nil {
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
	if len(got) != 1 || got[0].ID != "inflight" || got[0].Status != Unknown || !got[0].Spent || got[0].FinishedAt.IsZero() {
		t.Fatalf("Recover = %+v, want the in-flight call, unknown", got)
	}
	if rec, _ := l2.Call(ctx, "done"); rec.Status != Succeeded {
		t.Errorf("finished call became %s", rec.Status)
	}
	if u := mustUsage(t, l2, run); u.Calls != 2 {
		t.Errorf("run calls after recovery = %d, want 2: an unknown call is spent", u.Calls)
	}
	if _, err := l2.StartCall(ctx, call("next", run, "x1"), Limits{MaxCalls: 2}); failure.KindOf(err) != failure.BudgetExceeded {
		t.Errorf("a restarted host got a fresh allowance: %v", err)
	}
	if again, err := l2.Recover(ctx); err != nil || len(again) != 0 {
		t.Errorf("second Recover = %v, %v; want nothing", again, err)
	}
	if err := l2.FinishCall(ctx, CallFinish{ID: "inflight", Status: Succeeded}); !errors.Is(err, ErrAlreadyFinished) {
		t.Errorf("finishing an unknown call = %v, want ErrAlreadyFinished", err)
	}
}

// contractSurvivors: an owner dies with a call in flight while three others live on, and all
// three recover at once: the call is recorded unknown exactly once, by one of them.
func contractSurvivors(t *testing.T, dead Ledger, reopen func(t *testing.T, l Ledger) Ledger) {
	ctx := t.Context()
	run := RunRef{Tenant: "t", ID: "r"}
	mustStartExec(t, dead, run, "x1")
	if _, err := dead.StartCall(ctx, call("inflight", run, "x1"), Limits{}); err != nil {
		t.Fatal(err)
	}
	survivors := []Ledger{reopen(t, dead), reopen(t, dead), reopen(t, dead)}
	if err := dead.Close(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []CallRecord
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
	if len(got) != 1 || got[0].ID != "inflight" || got[0].Status != Unknown {
		t.Errorf("survivors recovered %+v; want the in-flight call once", got)
	}
	if u := mustUsage(t, survivors[0], run); u.Calls != 1 {
		t.Errorf("run calls = %d, want 1", u.Calls)
	}
}

// contractWatch: RunRecovery, left running in a survivor, records a call of an owner that
// dies after the survivor started (not only at startup), and reports it once.
func contractWatch(t *testing.T, dead Ledger, reopen func(t *testing.T, l Ledger) Ledger) {
	ctx, cancel := context.WithCancel(t.Context())
	survivor := reopen(t, dead)
	reports := make(chan []CallRecord, 16)
	var wg sync.WaitGroup
	wg.Go(func() {
		RunRecovery(ctx, survivor, 20*time.Millisecond, func(lost []CallRecord, err error) {
			if err != nil {
				t.Errorf("recovery pass: %v", err)
			}
			reports <- lost
		})
	})
	defer func() { cancel(); wg.Wait() }()
	time.Sleep(100 * time.Millisecond) // a few passes with nothing to do
	run := RunRef{Tenant: "t", ID: "r"}
	mustStartExec(t, dead, run, "x1")
	if _, err := dead.StartCall(ctx, call("inflight", run, "x1"), Limits{}); err != nil {
		t.Fatal(err)
	}
	if err := dead.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case lost := <-reports:
		if len(lost) != 1 || lost[0].ID != "inflight" || lost[0].Status != Unknown {
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
func contractApprovals(t *testing.T, l Ledger) {
	ctx := t.Context()
	run := RunRef{Tenant: "t", ID: "r"}
	mustStartExec(t, l, run, "x1")
	ask := ApprovalAsk{ID: "a1", Run: run, ExecutionID: "x1", CallID: "c1", Tool: "srv__wipe", Reason: "destructive", Status: ApprovalPending, Times: 1}
	if err := l.AskApproval(ctx, ask); err != nil {
		t.Fatal(err)
	}
	if err := l.AskApproval(ctx, ApprovalAsk{ID: "a0", Run: run, CallID: "c0", Tool: "srv__wipe", Status: ApprovalAccepted}); err == nil {
		t.Error("an approval was asked already accepted")
	}
	if err := l.AskApproval(ctx, ApprovalAsk{ID: "a0", Run: run, CallID: "c0", Tool: "srv__wipe", Status: ApprovalPending, Times: 2}); err == nil {
		t.Error("a pending approval stood for two calls: only unasked ones are summarised")
	}
	if err := l.AskApproval(ctx, ApprovalAsk{ID: "a2", Run: run, CallID: "c2", Tool: "srv__wipe", Reason: "destructive", Status: ApprovalUnasked}); err != nil {
		t.Fatal(err)
	}
	if err := l.AskApproval(ctx, ApprovalAsk{ID: "a3", Run: RunRef{Tenant: "u", ID: "r"}, CallID: "c3", Tool: "srv__wipe", Status: ApprovalPending}); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Recover(ctx); err != nil || len(got) != 0 {
		t.Errorf("Recover = %v, %v; want nothing: the approval is this ledger's own, pending", got, err)
	}
	recs, err := l.Approvals(ctx, run)
	if err != nil || len(recs) != 2 || recs[0].ID != "a1" || recs[0].Status != ApprovalPending || !recs[0].DecidedAt.IsZero() ||
		recs[0].AskedAt.IsZero() || recs[1].ID != "a2" || recs[1].Status != ApprovalUnasked || recs[1].DecidedAt.IsZero() {
		t.Fatalf("Approvals = %+v, %v; want a1 pending, a2 unasked and decided", recs, err)
	}
	if diff := cmp.Diff(ask, recs[0].ApprovalAsk); diff != "" {
		t.Errorf("recorded ask differs (-want +got):\n%s", diff)
	}
	if err := l.DecideApproval(ctx, ApprovalDecision{ID: "a1", Status: ApprovalPending}); err == nil {
		t.Error("pending decided an approval")
	}
	if err := l.DecideApproval(ctx, ApprovalDecision{ID: "a1", Status: ApprovalAccepted, AnsweredBy: "ann@example"}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []ApprovalDecision{{ID: "a1", Status: ApprovalDeclined}, {ID: "a2", Status: ApprovalAccepted}} {
		if err := l.DecideApproval(ctx, d); !errors.Is(err, ErrAlreadyFinished) {
			t.Errorf("DecideApproval(%+v) = %v, want ErrAlreadyFinished", d, err)
		}
	}
	if err := l.DecideApproval(ctx, ApprovalDecision{ID: "nope", Status: ApprovalDeclined}); !errors.Is(err, ErrNotFound) {
		t.Errorf("DecideApproval(unknown) = %v, want ErrNotFound", err)
	}
	recs, _ = l.Approvals(ctx, run)
	if len(recs) != 2 || recs[0].Status != ApprovalAccepted || recs[0].AnsweredBy != "ann@example" || recs[0].DecidedAt.Before(recs[0].AskedAt) {
		t.Errorf("after the decision: %+v", recs)
	}
	if u := mustUsage(t, l, run); u != (Usage{}) {
		t.Errorf("approvals spent %+v; an approval spends nothing", u)
	}
	if recs, err := l.Approvals(ctx, RunRef{Tenant: "t", ID: "other"}); err != nil || len(recs) != 0 {
		t.Errorf("Approvals(other run) = %v, %v", recs, err)
	}
}

// contractApprovalCrash: an owner dies while a person is being asked; a survivor records the
// approval unknown, which can then never be accepted, and leaves its own pending one alone.
func contractApprovalCrash(t *testing.T, dead Ledger, reopen func(t *testing.T, l Ledger) Ledger) {
	ctx := t.Context()
	run := RunRef{Tenant: "t", ID: "r"}
	if err := dead.AskApproval(ctx, ApprovalAsk{ID: "a1", Run: run, CallID: "c1", Tool: "srv__wipe", Status: ApprovalPending}); err != nil {
		t.Fatal(err)
	}
	survivor := reopen(t, dead)
	if err := survivor.AskApproval(ctx, ApprovalAsk{ID: "a2", Run: run, CallID: "c2", Tool: "srv__wipe", Status: ApprovalPending}); err != nil {
		t.Fatal(err)
	}
	if err := dead.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := survivor.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := survivor.Approvals(ctx, run)
	if err != nil || len(recs) != 2 || recs[0].Status != ApprovalUnknown || recs[0].DecidedAt.IsZero() || recs[1].Status != ApprovalPending {
		t.Fatalf("Approvals after recovery = %+v, %v; want a1 unknown, a2 still pending", recs, err)
	}
	if err := survivor.DecideApproval(ctx, ApprovalDecision{ID: "a1", Status: ApprovalAccepted}); !errors.Is(err, ErrAlreadyFinished) {
		t.Errorf("accepting an approval recorded unknown = %v, want ErrAlreadyFinished", err)
	}
	if _, err := survivor.Call(ctx, "c1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the call of an unknown approval was recorded: %v", err)
	}
}

// finishLazilyThenFlush finishes call id lazily (failed) with no write after it, and flushes
// until the finish returns: Flush commits it, and a read sees it.
func finishLazilyThenFlush(t *testing.T, l interface {
	Ledger
	lazyFinisher
	flusher
}, id string) {
	t.Helper()
	ctx := t.Context()
	done := make(chan error, 1)
	go func() { done <- l.FinishCallLater(ctx, CallFinish{ID: id, Status: Failed, Kind: "tool_error"}) }()
	for {
		if err := l.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			if rec, err := l.Call(ctx, id); err != nil || rec.Status != Failed {
				t.Fatalf("%s = %+v, %v", id, rec, err)
			}
			return
		case <-time.After(time.Millisecond):
		}
	}
}
