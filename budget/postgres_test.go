package budget

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/pgdb"
	"github.com/mcp-sandbox/mcp-sandbox/internal/pgdb/pgtest"
)

// openPostgres opens a ledger on dsn, closed when t ends.
func openPostgres(t *testing.T, dsn string, opts *PostgresOptions) *Postgres {
	t.Helper()
	l, err := OpenPostgres(t.Context(), dsn, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestPostgresLedgerContract(t *testing.T) {
	runLedgerContractAt(t, func(t *testing.T) string { return pgtest.Schema(t) },
		func(t *testing.T, dsn string) Ledger { return openPostgres(t, dsn, nil) })
}

// TestPostgresReplicasStartTogether: eight replicas opening a fresh database at once all
// start, and the schema is migrated once.
func TestPostgresReplicasStartTogether(t *testing.T) {
	dsn := pgtest.Schema(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			l, err := OpenPostgres(t.Context(), dsn, nil)
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

// TestPostgresReplicasShareOneBudget: 64 calls raced through three replicas against
// max_calls 10 on one Run: exactly 10 admitted, and the Run and execution count 10.
func TestPostgresReplicasShareOneBudget(t *testing.T) {
	dsn := pgtest.Schema(t)
	ls := []*Postgres{openPostgres(t, dsn, nil), openPostgres(t, dsn, nil), openPostgres(t, dsn, nil)}
	ctx := t.Context()
	run := RunRef{Tenant: "t", ID: "shared"}
	mustStartExec(t, ls[0], run, "x1")
	var mu sync.Mutex
	admitted := 0
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			_, err := ls[i%3].StartCall(ctx, call(NewID("c_"), run, "x1"), Limits{MaxCalls: 10})
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
	if u := mustUsage(t, ls[2], run); u.Calls != 10 {
		t.Errorf("run calls = %d, want 10", u.Calls)
	}
	var execCalls int64
	if err := ls[1].pool.QueryRow(ctx, `SELECT calls FROM ledger_executions WHERE id = 'x1'`).Scan(&execCalls); err != nil || execCalls != 10 {
		t.Errorf("execution calls = %d, %v; want 10", execCalls, err)
	}
}

// TestPostgresLiveLeaseOutlivesItsTTL: a ledger that keeps renewing keeps its calls, however
// long they take.
func TestPostgresLiveLeaseOutlivesItsTTL(t *testing.T) {
	dsn := pgtest.Schema(t)
	a := openPostgres(t, dsn, &PostgresOptions{LeaseTTL: time.Second})
	b := openPostgres(t, dsn, &PostgresOptions{LeaseTTL: time.Second})
	run := RunRef{Tenant: "t", ID: "r"}
	mustStartExec(t, a, run, "x1")
	if _, err := a.StartCall(t.Context(), call("slow", run, "x1"), Limits{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	if lost, err := b.Recover(t.Context()); err != nil || len(lost) != 0 {
		t.Fatalf("Recover = %+v, %v; want nothing: the owner is alive and renewing", lost, err)
	}
	if err := a.FinishCall(t.Context(), CallFinish{ID: "slow", Status: Succeeded}); err != nil {
		t.Errorf("finishing a call held past the TTL: %v", err)
	}
}

// TestPostgresLostLeaseIsTakenBack: an owner that stalled past its lease has its calls then
// in flight recorded unknown by a survivor; it finds out, takes a new lease, and the calls it
// starts afterwards are its own again.
func TestPostgresLostLeaseIsTakenBack(t *testing.T) {
	dsn := pgtest.Schema(t)
	a := openPostgres(t, dsn, nil)
	b := openPostgres(t, dsn, nil)
	ctx := t.Context()
	run := RunRef{Tenant: "t", ID: "r"}
	mustStartExec(t, a, run, "x1")
	if _, err := a.StartCall(ctx, call("before", run, "x1"), Limits{}); err != nil {
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
	if _, err := a.StartCall(ctx, call("after", run, "x1"), Limits{}); err != nil {
		t.Fatalf("a call after the lease was lost: %v", err)
	}
	if lost, err := b.Recover(ctx); err != nil || len(lost) != 0 {
		t.Errorf("Recover = %+v, %v; want nothing: the owner holds a new lease", lost, err)
	}
	if rec, _ := a.Call(ctx, "after"); rec.Status != Started {
		t.Errorf("call after the new lease = %s, want started", rec.Status)
	}
	if err := a.FinishCall(ctx, CallFinish{ID: "before", Status: Succeeded}); err == nil {
		t.Error("a call recorded unknown was finished after all")
	}
	if u := mustUsage(t, b, run); u.Calls != 2 {
		t.Errorf("run calls = %d, want 2", u.Calls)
	}
}

// TestPostgresRecoverAfterKill kills a real process holding a started call (no Close: its
// lease stays until it expires) while a survivor watches: the survivor records the call
// unknown once the lease has run out, without restarting.
func TestPostgresRecoverAfterKill(t *testing.T) {
	if dsn := os.Getenv("BUDGET_PG_CRASH_CHILD"); dsn != "" {
		pgCrashChild(dsn)
		return
	}
	dsn := pgtest.Schema(t)
	const ttl = time.Second
	survivor := openPostgres(t, dsn, &PostgresOptions{LeaseTTL: ttl})
	ctx, cancel := context.WithCancel(t.Context())
	found := make(chan []CallRecord, 4)
	var wg sync.WaitGroup
	wg.Go(func() {
		RunRecovery(ctx, survivor, ttl/4, func(lost []CallRecord, err error) {
			if err != nil {
				t.Errorf("recovery: %v", err)
			}
			found <- lost
		})
	})
	defer func() { cancel(); wg.Wait() }()

	marker := filepath.Join(t.TempDir(), "started")
	cmd := exec.Command(os.Args[0], "-test.run=^TestPostgresRecoverAfterKill$")
	cmd.Env = append(os.Environ(), "BUDGET_PG_CRASH_CHILD="+dsn, "BUDGET_PG_CRASH_MARKER="+marker)
	out, err := cmd.CombinedOutput()
	killed := time.Now()
	if err == nil {
		t.Fatalf("child exited cleanly; want killed. output:\n%s", out)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("child never started its call: %v\n%s", err, out)
	}
	select {
	case lost := <-found:
		took := time.Since(killed)
		if len(lost) != 1 || lost[0].ID != "c_child" || lost[0].Status != Unknown || !lost[0].Spent {
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

func pgCrashChild(dsn string) {
	ctx := context.Background()
	l, err := OpenPostgres(ctx, dsn, &PostgresOptions{LeaseTTL: time.Second})
	if err != nil {
		os.Exit(3)
	}
	run := RunRef{Tenant: "t", ID: "r"}
	if l.StartExecution(ctx, run, "x", "") != nil {
		os.Exit(3)
	}
	if _, err := l.StartCall(ctx, CallStart{ID: "c_child", Run: run, ExecutionID: "x", Tool: "slow"}, Limits{}); err != nil {
		os.Exit(3)
	}
	_ = os.WriteFile(os.Getenv("BUDGET_PG_CRASH_MARKER"), nil, 0o600)
	p, _ := os.FindProcess(os.Getpid())
	_ = p.Kill() // SIGKILL: no Close, the lease row stays until it expires
	select {}
}

// A queued tool_call_finished goes with the next metered tool_call_started, in one batch, and
// both are committed; a record for an unknown call fails alone; Flush writes what is queued.
func TestPostgresPipelinesFinishes(t *testing.T) {
	l := openPostgres(t, pgtest.Schema(t), nil)
	ctx := t.Context()
	run := RunRef{Tenant: "t", ID: "r"}
	if err := l.StartExecution(ctx, run, "x", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := l.StartCall(ctx, CallStart{ID: "c1", Run: run, ExecutionID: "x", Tool: "s__t"}, Limits{}); err != nil {
		t.Fatal(err)
	}
	// Queue two records directly (no flusher involved), then start the next call.
	queue := func(f CallFinish) *pgFinish {
		op := &pgFinish{f: f, done: make(chan error, 1)}
		l.queue.mu.Lock()
		l.queue.pending = append(l.queue.pending, op)
		l.queue.mu.Unlock()
		return op
	}
	good := queue(CallFinish{ID: "c1", Status: Succeeded, Usage: Usage{TransferBytes: 40}})
	bad := queue(CallFinish{ID: "nope", Status: Succeeded})
	u, err := l.StartCall(ctx, CallStart{ID: "c2", Run: run, ExecutionID: "x", Tool: "s__t"}, Limits{MaxCalls: 5})
	if err != nil || u.Calls != 2 || u.TransferBytes != 40 {
		t.Fatalf("StartCall with finishes in its batch = %+v, %v; want 2 calls and c1's 40 bytes", u, err)
	}
	if err := <-good.done; err != nil {
		t.Fatalf("c1's finish: %v", err)
	}
	if err := <-bad.done; !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown call's finish = %v, want ErrNotFound", err)
	}
	finishLazilyThenFlush(t, l, "c2")
}

// TestPostgresOlderLedgerIsMigrated: a database at schema 3 gains the records' times, and a
// refusal recorded before stands for one call.
func TestPostgresOlderLedgerIsMigrated(t *testing.T) {
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
	l := openPostgres(t, dsn, nil)
	if c, err := l.Call(ctx, "old"); err != nil || c.Times != 1 || c.Status != Refused {
		t.Fatalf("an older refusal = %+v, %v; want it refused, standing for one call", c, err)
	}
	if err := l.AskApproval(ctx, ApprovalAsk{ID: "a", Run: RunRef{Tenant: "t", ID: "r"}, Tool: "s__t", Status: ApprovalUnasked, Times: 5}); err != nil {
		t.Fatal(err)
	}
	if recs, err := l.Approvals(ctx, RunRef{Tenant: "t", ID: "r"}); err != nil || len(recs) != 1 || recs[0].Times != 5 {
		t.Fatalf("a summary of approvals in a migrated ledger = %+v, %v; want Times 5", recs, err)
	}
}
