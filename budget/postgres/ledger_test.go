package postgres

import (
	"context"
	"errors"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/budget/ledgertest"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/pgdb"
	"github.com/mcp-sandbox/mcp-sandbox/internal/pgdb/pgtest"
	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
)

// openLedger opens a ledger on dsn, closed when t ends.
func openLedger(t testing.TB, dsn string, opts *Options) *Ledger {
	t.Helper()
	l, err := Open(t.Context(), dsn, opts)
	return ledgertest.Opened(t, l, err)
}

func TestLedgerContract(t *testing.T) {
	ledgertest.RunLedgerContractAt(t, func(t *testing.T) string { return pgtest.Schema(t) },
		func(t *testing.T, dsn string) budget.Ledger { return openLedger(t, dsn, nil) })
}

// TestReplicasStartTogether: eight replicas opening a fresh database at once all
// start, and the schema is migrated once.
func TestReplicasStartTogether(t *testing.T) {
	dsn := pgtest.Schema(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			l, err := Open(t.Context(), dsn, nil)
			if err != nil {
				t.Errorf("open: %v", err)
				return
			}
			l.Close()
		})
	}
	wg.Wait()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n, v int
	if err := conn.QueryRow(t.Context(), `SELECT count(*), max(version) FROM mcp_sandbox_migrations WHERE component = 'ledger'`).Scan(&n, &v); err != nil {
		t.Fatal(err)
	}
	if n != len(postgresSchema) || v != len(postgresSchema) {
		t.Errorf("migrations recorded %d, up to version %d; want each of %d once", n, v, len(postgresSchema))
	}
}

// TestReplicasShareOneBudget: 64 calls raced through three replicas against
// max_calls 10 on one Run: exactly 10 admitted, and the Run and execution count 10.
func TestReplicasShareOneBudget(t *testing.T) {
	dsn := pgtest.Schema(t)
	ls := []*Ledger{openLedger(t, dsn, nil), openLedger(t, dsn, nil), openLedger(t, dsn, nil)}
	ctx := t.Context()
	run := budget.RunRef{Tenant: "t", ID: "shared"}
	ledgertest.StartExecution(t, ls[0], run, "x1")
	var mu sync.Mutex
	admitted := 0
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			_, err := ls[i%3].StartCall(ctx, ledgertest.Call(budget.NewID("c_"), run, "x1"), budget.Limits{MaxCalls: 10})
			if err != nil && failure.KindOf(err) != failure.BudgetExceeded {
				t.Errorf("StartCall: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				admitted++
			}
		})
	}
	wg.Wait()
	if admitted != 10 {
		t.Errorf("admitted %d, want 10", admitted)
	}
	if u := ledgertest.Usage(t, ls[2], run); u.Calls != 10 {
		t.Errorf("run calls = %d, want 10", u.Calls)
	}
	var execCalls int64
	if err := ls[1].pool.QueryRow(ctx, `SELECT calls FROM ledger_executions WHERE id = 'x1'`).Scan(&execCalls); err != nil || execCalls != 10 {
		t.Errorf("execution calls = %d, %v; want 10", execCalls, err)
	}
}

// TestLiveLeaseOutlivesItsTTL: a ledger that keeps renewing keeps its calls, however
// long they take.
func TestLiveLeaseOutlivesItsTTL(t *testing.T) {
	dsn := pgtest.Schema(t)
	a := openLedger(t, dsn, &Options{LeaseTTL: time.Second})
	b := openLedger(t, dsn, &Options{LeaseTTL: time.Second})
	run := budget.RunRef{Tenant: "t", ID: "r"}
	ledgertest.StartExecution(t, a, run, "x1")
	if _, err := a.StartCall(t.Context(), ledgertest.Call("slow", run, "x1"), budget.Limits{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	if lost, err := b.Recover(t.Context()); err != nil || len(lost) != 0 {
		t.Fatalf("Recover = %+v, %v; want nothing: the owner is alive and renewing", lost, err)
	}
	if err := a.FinishCall(t.Context(), budget.CallFinish{ID: "slow", Status: budget.Succeeded}); err != nil {
		t.Errorf("finishing a call held past the TTL: %v", err)
	}
}

// TestLostLeaseIsTakenBack: an owner that stalled past its lease has its calls then
// in flight recorded unknown by a survivor; it finds out, takes a new lease, and the calls it
// starts afterwards are its own again.
func TestLostLeaseIsTakenBack(t *testing.T) {
	dsn := pgtest.Schema(t)
	a := openLedger(t, dsn, nil)
	b := openLedger(t, dsn, nil)
	ctx := t.Context()
	run := budget.RunRef{Tenant: "t", ID: "r"}
	ledgertest.StartExecution(t, a, run, "x1")
	if _, err := a.StartCall(ctx, ledgertest.Call("before", run, "x1"), budget.Limits{}); err != nil {
		t.Fatal(err)
	}
	// The stall: a's lease runs out without a renewal.
	if _, err := a.pool.Exec(ctx, `UPDATE ledger_leases SET expires_at = now() - interval '1 second' WHERE owner = $1`, a.owner); err != nil {
		t.Fatal(err)
	}
	lost, err := b.Recover(ctx)
	if err != nil || len(lost) != 1 || lost[0].ID != "before" {
		t.Fatalf("Recover = %+v, %v; want the stalled owner's call", lost, err)
	}
	if _, err := a.StartCall(ctx, ledgertest.Call("after", run, "x1"), budget.Limits{}); err != nil {
		t.Fatalf("a call after the lease was lost: %v", err)
	}
	if lost, err := b.Recover(ctx); err != nil || len(lost) != 0 {
		t.Errorf("Recover = %+v, %v; want nothing: the owner holds a new lease", lost, err)
	}
	if rec, _ := a.Call(ctx, "after"); rec.Status != budget.Started {
		t.Errorf("call after the new lease = %s, want started", rec.Status)
	}
	if err := a.FinishCall(ctx, budget.CallFinish{ID: "before", Status: budget.Succeeded}); err == nil {
		t.Error("a call recorded unknown was finished after all")
	}
	if u := ledgertest.Usage(t, b, run); u.Calls != 2 {
		t.Errorf("run calls = %d, want 2", u.Calls)
	}
}

// TestTicketAcrossALostLease (issue 38): a call started before its owner's lease was lost is
// not surely open once the lease is taken back, however fresh that lease is: a survivor may
// have recorded it unknown in between (it did here), so its result waits for Finish, which
// finds it unknown. A call started under the new lease is surely open.
func TestTicketAcrossALostLease(t *testing.T) {
	dsn := pgtest.Schema(t)
	a := openLedger(t, dsn, nil)
	b := openLedger(t, dsn, nil)
	ctx := t.Context()
	m, err := budget.Start(ctx, a, budget.RunRef{Tenant: "t", ID: "r"}, "x1", "", budget.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	before, fe := m.Admit(ctx, budget.Call{Tool: "slow"})
	if fe != nil {
		t.Fatal(fe)
	}
	if !before.SurelyOpen() {
		t.Fatal("a call under a fresh lease is not surely open")
	}
	if _, err := a.pool.Exec(ctx, `UPDATE ledger_leases SET expires_at = now() - interval '1 second' WHERE owner = $1`, a.owner); err != nil {
		t.Fatal(err)
	}
	if lost, err := b.Recover(ctx); err != nil || len(lost) != 1 {
		t.Fatalf("Recover = %+v, %v; want the stalled owner's call", lost, err)
	}
	if err := a.relive(ctx); err != nil { // what renew does on finding its lease gone
		t.Fatal(err)
	}
	if before.SurelyOpen() {
		t.Error("a call started before the lease was lost is surely open under the lease taken back")
	}
	if err := before.Finish(ctx, budget.CallFinish{Status: budget.Succeeded}); !errors.Is(err, budget.ErrAlreadyFinished) {
		t.Errorf("finishing the call recorded unknown: %v, want ErrAlreadyFinished", err)
	}
	after, fe := m.Admit(ctx, budget.Call{Tool: "slow"})
	if fe != nil {
		t.Fatal(fe)
	}
	if !after.SurelyOpen() {
		t.Error("a call started under the lease taken back is not surely open")
	}
}

// TestRecoverAfterKill kills a real process holding a started call (no Close: its
// lease stays until it expires) while a survivor watches: the survivor records the call
// unknown once the lease has run out, without restarting.
func TestRecoverAfterKill(t *testing.T) {
	if os.Getenv(ledgertest.CrashPlaceEnv) != "" {
		ledgertest.CrashChild(func(ctx context.Context, dsn string) (budget.Ledger, error) {
			return Open(ctx, dsn, &Options{LeaseTTL: time.Second})
		})
	}
	dsn := pgtest.Schema(t)
	const ttl = time.Second
	survivor := openLedger(t, dsn, &Options{LeaseTTL: ttl})
	ctx, cancel := context.WithCancel(t.Context())
	found := make(chan []budget.CallRecord, 4)
	var wg sync.WaitGroup
	wg.Go(func() {
		budget.RunRecovery(ctx, survivor, ttl/4, func(lost []budget.CallRecord, err error) {
			if err != nil {
				t.Errorf("recovery: %v", err)
			}
			found <- lost
		})
	})
	defer func() { cancel(); wg.Wait() }()

	ledgertest.KillChild(t, "TestRecoverAfterKill", dsn)
	killed := time.Now()
	select {
	case lost := <-found:
		took := time.Since(killed)
		if len(lost) != 1 || lost[0].ID != "c_child" || lost[0].Status != budget.Unknown || !lost[0].Spent {
			t.Fatalf("recovered %+v", lost)
		}
		t.Logf("recorded unknown %v after the kill (lease %v)", took.Round(time.Millisecond), ttl)
	case <-time.After(gate.Scaled(30 * time.Second)):
		t.Fatal("the killed owner's call was never recovered")
	}
	var leases int
	if err := survivor.pool.QueryRow(t.Context(), `SELECT count(*) FROM ledger_leases`).Scan(&leases); err != nil || leases != 1 {
		t.Errorf("leases = %d, %v; want the survivor's only", leases, err)
	}
}

// A queued tool_call_finished goes with the next metered tool_call_started, in one batch, and
// both are committed; a record for an unknown call fails alone; Flush writes what is queued.
func TestPipelinesFinishes(t *testing.T) {
	l := openLedger(t, pgtest.Schema(t), nil)
	ctx := t.Context()
	run := budget.RunRef{Tenant: "t", ID: "r"}
	if _, err := l.StartExecution(ctx, run, "x", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := l.StartCall(ctx, budget.CallStart{ID: "c1", Run: run, ExecutionID: "x", Tool: "s__t"}, budget.Limits{}); err != nil {
		t.Fatal(err)
	}
	// Queue two records directly (no flusher involved), then start the next call.
	queue := func(f budget.CallFinish) *pgFinish {
		op := &pgFinish{f: f, done: make(chan error, 1)}
		l.queue.mu.Lock()
		l.queue.pending = append(l.queue.pending, op)
		l.queue.mu.Unlock()
		return op
	}
	good := queue(budget.CallFinish{ID: "c1", Status: budget.Succeeded, Usage: budget.Usage{TransferBytes: 40}})
	bad := queue(budget.CallFinish{ID: "nope", Status: budget.Succeeded})
	u, err := l.StartCall(ctx, budget.CallStart{ID: "c2", Run: run, ExecutionID: "x", Tool: "s__t"}, budget.Limits{MaxCalls: 5})
	if err != nil || u.Calls != 2 || u.TransferBytes != 40 {
		t.Fatalf("StartCall with finishes in its batch = %+v, %v; want 2 calls and c1's 40 bytes", u, err)
	}
	if err := <-good.done; err != nil {
		t.Fatalf("c1's finish: %v", err)
	}
	if err := <-bad.done; !errors.Is(err, budget.ErrNotFound) {
		t.Fatalf("unknown call's finish = %v, want ErrNotFound", err)
	}
	// An execution's start takes what is queued along too, and its usage counts it.
	queued := queue(budget.CallFinish{ID: "c2", Status: budget.Succeeded, Usage: budget.Usage{ProducedBytes: 7}})
	if u, err := l.StartExecution(ctx, run, "x2", ""); err != nil || u != (budget.Usage{Calls: 2, TransferBytes: 40, ProducedBytes: 7}) {
		t.Fatalf("StartExecution with a finish in its batch = %+v, %v; want 2 calls, 40 and 7 bytes", u, err)
	}
	if err := <-queued.done; err != nil {
		t.Fatalf("c2's finish: %v", err)
	}
	if _, err := l.StartCall(ctx, budget.CallStart{ID: "c3", Run: run, ExecutionID: "x2", Tool: "s__t"}, budget.Limits{}); err != nil {
		t.Fatal(err)
	}
	ledgertest.FinishLazilyThenFlush(t, l, "c3")
}

// TestOlderLedgerIsMigrated: a database at schema 3 gains the records' times, and a
// refusal recorded before stands for one call.
func TestOlderLedgerIsMigrated(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.Schema(t)
	pool, err := pgdb.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pgdb.Migrate(ctx, pool, "ledger", postgresSchema[:3]); err != nil {
		pool.Close()
		t.Fatal(err)
	}
	_, err = pool.Exec(ctx, `INSERT INTO ledger_calls (id, tenant, run_id, execution_id, tool, argument_bytes, owner, status, spent, kind)
		VALUES ('old', 't', 'r', 'x0', 's__t', 9, 'o_gone', 'refused', false, 'budget_exceeded')`)
	pool.Close()
	if err != nil {
		t.Fatal(err)
	}
	l := openLedger(t, dsn, nil)
	if c, err := l.Call(ctx, "old"); err != nil || c.Times != 1 || c.Status != budget.Refused {
		t.Fatalf("an older refusal = %+v, %v; want it refused, standing for one call", c, err)
	}
	if err := l.AskApproval(ctx, budget.ApprovalAsk{ID: "a", Run: budget.RunRef{Tenant: "t", ID: "r"}, Tool: "s__t", Status: budget.ApprovalUnasked, Times: 5}); err != nil {
		t.Fatal(err)
	}
	if recs, err := l.Approvals(ctx, budget.RunRef{Tenant: "t", ID: "r"}); err != nil || len(recs) != 1 || recs[0].Times != 5 {
		t.Fatalf("a summary of approvals in a migrated ledger = %+v, %v; want Times 5", recs, err)
	}
}

// A Run's context economy is kept on its row (migration 14): a database at the migration
// before gets its Runs' sums from their ended executions when it is migrated, and an end written as an
// older binary writes it (its own UPDATE of the execution, no word of the Run) counts all the
// same, as does an end written over.
func TestRunContextKeptOnTheRun(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.Schema(t)
	pool, err := pgdb.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	before := slices.Index(postgresSchema, runContextMigration)
	if _, err := pgdb.Migrate(ctx, pool, "ledger", postgresSchema[:before]); err != nil {
		t.Fatal(err)
	}
	// As an older binary writes them: two ended executions of the Run, one running, one of
	// another tenant's Run of the same id.
	if _, err := pool.Exec(ctx, `INSERT INTO ledger_runs (tenant, run_id) VALUES ('t', 'r'), ('u', 'r');
		INSERT INTO ledger_executions (id, tenant, run_id, ended_at, binding_bytes, returned_bytes, kept_out_bytes) VALUES
			('x0', 't', 'r', now(), 1, 2, 3), ('x1', 't', 'r', now(), 10, 20, 30), ('running', 't', 'r', NULL, 5, 5, 5),
			('y0', 'u', 'r', now(), 7, 7, 7)`); err != nil {
		t.Fatal(err)
	}
	l := openLedger(t, dsn, nil)
	run := budget.RunRef{Tenant: "t", ID: "r"}
	check := func(when string, want telemetry.Context) {
		t.Helper()
		if c, err := l.RunContext(ctx, run); err != nil || c != want {
			t.Fatalf("RunContext %s = %+v, %v; want %+v", when, c, err, want)
		}
	}
	check("after the migration", telemetry.Context{BindingBytes: 11, ReturnedBytes: 22, KeptOutBytes: 33})
	if _, err := pool.Exec(ctx, `UPDATE ledger_executions SET ended_at = now(), status = 'completed', binding_bytes = 100,
		returned_bytes = 200, kept_out_bytes = 300 WHERE id = 'running'`); err != nil {
		t.Fatal(err)
	}
	check("after an older binary's end", telemetry.Context{BindingBytes: 111, ReturnedBytes: 222, KeptOutBytes: 333})
	if _, err := pool.Exec(ctx, `UPDATE ledger_executions SET ended_at = now(), binding_bytes = 1000, returned_bytes = 0,
		kept_out_bytes = 1000 WHERE id = 'x0'`); err != nil {
		t.Fatal(err)
	}
	check("after an end written over", telemetry.Context{BindingBytes: 1110, ReturnedBytes: 220, KeptOutBytes: 1330})
	if c, err := l.RunContext(ctx, budget.RunRef{Tenant: "u", ID: "r"}); err != nil || c != (telemetry.Context{BindingBytes: 7, ReturnedBytes: 7, KeptOutBytes: 7}) {
		t.Fatalf("the other tenant's Run = %+v, %v", c, err)
	}
	if c, err := l.RunContext(ctx, budget.RunRef{Tenant: "t", ID: "never"}); err != nil || c != (telemetry.Context{}) {
		t.Fatalf("a Run never seen = %+v, %v", c, err)
	}
}

func BenchmarkShapeMerge(b *testing.B) {
	ledgertest.BenchmarkShapeMerge(b, openLedger(b, pgtest.Schema(b), nil))
}

// BenchmarkExecutionLedger: what the ledger costs one execution (ledgertest's), in round
// trips to the database as much as in this process's CPU.
func BenchmarkExecutionLedger(b *testing.B) {
	ledgertest.BenchmarkExecutionLedger(b, openLedger(b, pgtest.Schema(b), nil))
}
