package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/budget/ledgertest"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
)

func openLedger(t *testing.T, dir string) *Ledger {
	t.Helper()
	l, err := Open(t.Context(), dir, nil)
	return ledgertest.Opened(t, l, err)
}

func TestLedgerContract(t *testing.T) {
	ledgertest.RunLedgerContractAt(t, func(t *testing.T) string { return t.TempDir() },
		func(t *testing.T, dir string) budget.Ledger { return openLedger(t, dir) })
}

func TestIsWAL(t *testing.T) {
	l := openLedger(t, t.TempDir())
	var mode string
	if err := l.db.QueryRowContext(t.Context(), "PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Errorf("journal_mode = %q, want wal", mode)
	}
}

// TestRecoverAfterKill kills a real process holding a started call (its flock dies with it,
// and it never ran Close) and recovers in this one.
func TestRecoverAfterKill(t *testing.T) {
	if os.Getenv(ledgertest.CrashPlaceEnv) != "" {
		ledgertest.CrashChild(func(ctx context.Context, dir string) (budget.Ledger, error) { return Open(ctx, dir, nil) })
	}
	dir := t.TempDir()
	ledgertest.KillChild(t, "TestRecoverAfterKill", dir)
	l := openLedger(t, dir)
	got, err := l.Recover(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "c_child" || got[0].Status != budget.Unknown {
		t.Fatalf("Recover = %+v", got)
	}
	if u := ledgertest.Usage(t, l, budget.RunRef{Tenant: "t", ID: "r"}); u.Calls != 1 {
		t.Errorf("RunUsage = %+v; want 1 call", u)
	}
}

// TestWriteWaitHonoursContext: a writer waiting behind another write gives up when its
// context ends instead of blocking until the other write finishes.
func TestWriteWaitHonoursContext(t *testing.T) {
	l, err := Open(t.Context(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.batch.wmu <- struct{}{} // another batch in progress
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- l.write(ctx, func(*stmtTx) error { return nil }) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("write = %v, want a deadline error", err)
		}
	case <-time.After(gate.Scaled(5 * time.Second)):
		t.Fatal("write ignored its context while waiting for the write lock")
	}
	<-l.batch.wmu
}

// TestOlderLedgerIsMigrated: a ledger file from before the executions table had
// agent_version opens, gains the column, and records versions; and approvals; and a call
// record's times.
func TestOlderLedgerIsMigrated(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, LedgerFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE executions (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, run_id TEXT NOT NULL,
		started_at INTEGER NOT NULL, ended_at INTEGER, status TEXT NOT NULL DEFAULT 'running', attachments TEXT,
		calls INTEGER NOT NULL DEFAULT 0, transfer_bytes INTEGER NOT NULL DEFAULT 0, produced_bytes INTEGER NOT NULL DEFAULT 0,
		preserved_bytes INTEGER NOT NULL DEFAULT 0)`); err != nil {
		t.Fatal(err)
	}
	// A refusal recorded before records had Times stands for one call.
	if _, err := db.Exec(`CREATE TABLE tool_calls (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, run_id TEXT NOT NULL,
		execution_id TEXT NOT NULL, tool TEXT NOT NULL, argument_bytes INTEGER NOT NULL, owner TEXT NOT NULL, status TEXT NOT NULL,
		spent INTEGER NOT NULL, started_at INTEGER NOT NULL, finished_at INTEGER, transfer_bytes INTEGER NOT NULL DEFAULT 0,
		produced_bytes INTEGER NOT NULL DEFAULT 0, preserved_bytes INTEGER NOT NULL DEFAULT 0, attachments TEXT,
		kind TEXT NOT NULL DEFAULT '', message TEXT NOT NULL DEFAULT '');
		INSERT INTO tool_calls (id, tenant, run_id, execution_id, tool, argument_bytes, owner, status, spent, started_at, finished_at, kind)
		VALUES ('old', 't', 'r', 'x0', 's__t', 9, 'o_gone', 'refused', 0, 1, 1, 'budget_exceeded')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	l, err := Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.StartExecution(ctx, budget.RunRef{Tenant: "t", ID: "r"}, "x", "sha256:v1"); err != nil {
		t.Fatalf("an execution in a migrated ledger: %v", err)
	}
	// The approvals table came later still.
	if err := l.AskApproval(ctx, budget.ApprovalAsk{ID: "a", Run: budget.RunRef{Tenant: "t", ID: "r"}, CallID: "c", Tool: "s__t", Status: budget.ApprovalPending}); err != nil {
		t.Fatalf("an approval in a migrated ledger: %v", err)
	}
	// The context economy's columns came too, and the file is marked as set up, so the next
	// open skips the schema.
	if _, err := l.EndExecution(ctx, budget.ExecutionEnd{ID: "x", Status: "completed", Context: telemetry.Context{BindingBytes: 9, ReturnedBytes: 2, KeptOutBytes: 7}}); err != nil {
		t.Fatal(err)
	}
	if c, err := l.RunContext(ctx, budget.RunRef{Tenant: "t", ID: "r"}); err != nil || c.KeptOutBytes != 7 {
		t.Fatalf("RunContext in a migrated ledger = %+v, %v", c, err)
	}
	if c, err := l.Call(ctx, "old"); err != nil || c.Times != 1 || c.Status != budget.Refused {
		t.Fatalf("an older refusal = %+v, %v; want it refused, standing for one call", c, err)
	}
	if err := l.RefuseCall(ctx, budget.Refusal{CallStart: ledgertest.Call("new", budget.RunRef{Tenant: "t", ID: "r"}, "x"), Kind: "budget_exceeded", Times: 12}); err != nil {
		t.Fatal(err)
	}
	if c, err := l.Call(ctx, "new"); err != nil || c.Times != 12 {
		t.Fatalf("a summary in a migrated ledger = %+v, %v; want Times 12", c, err)
	}
	var v int
	if err := l.db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != sqliteSchemaVersion {
		t.Fatalf("user_version = %d, %v; want %d", v, err, sqliteSchemaVersion)
	}
}

// A Run's context economy is kept on its row (version 12): a file of version 10 gets its Runs'
// sums from their ended executions when it is opened, and an end written as an older binary
// writes it (its own UPDATE of the execution, no word of the Run) counts all the same.
func TestRunContextKeptOnTheRun(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	run := budget.RunRef{Tenant: "t", ID: "r"}
	l := openLedger(t, dir)
	for i, c := range []telemetry.Context{{BindingBytes: 1, ReturnedBytes: 2, KeptOutBytes: 3}, {BindingBytes: 10, ReturnedBytes: 20, KeptOutBytes: 30}} {
		id := fmt.Sprintf("x%d", i)
		if _, err := l.StartExecution(ctx, run, id, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := l.EndExecution(ctx, budget.ExecutionEnd{ID: id, Status: "completed", Context: c}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.StartExecution(ctx, run, "running", ""); err != nil { // not ended: not counted
		t.Fatal(err)
	}
	want := telemetry.Context{BindingBytes: 11, ReturnedBytes: 22, KeptOutBytes: 33}
	if c, err := l.RunContext(ctx, run); err != nil || c != want {
		t.Fatalf("RunContext = %+v, %v; want %+v", c, err, want)
	}
	// The file as version 10 left it: no trigger, no sums on the Run's row.
	if _, err := l.db.Exec(`DROP TRIGGER runs_context; UPDATE runs SET binding_bytes = 0, returned_bytes = 0, kept_out_bytes = 0;
		PRAGMA user_version = 10`); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = openLedger(t, dir)
	if c, err := l.RunContext(ctx, run); err != nil || c != want {
		t.Fatalf("RunContext after the migration = %+v, %v; want %+v", c, err, want)
	}
	if _, err := l.db.Exec(`UPDATE executions SET ended_at = 1, status = 'completed', binding_bytes = 100, returned_bytes = 200,
		kept_out_bytes = 300 WHERE id = 'running'`); err != nil {
		t.Fatal(err)
	}
	want = telemetry.Context{BindingBytes: 111, ReturnedBytes: 222, KeptOutBytes: 333}
	if c, err := l.RunContext(ctx, run); err != nil || c != want {
		t.Fatalf("RunContext after an older binary's end = %+v, %v; want %+v", c, err, want)
	}
	if c, err := l.RunContext(ctx, budget.RunRef{Tenant: "t", ID: "never"}); err != nil || c != (telemetry.Context{}) {
		t.Fatalf("a Run never seen = %+v, %v", c, err)
	}
}

// Writes queued while a batch commits are committed together, each in its own savepoint: one
// failing leaves the others. A lazy finish is committed by the next write or a Flush, and a
// read sees it.
func TestBatches(t *testing.T) {
	ctx := context.Background()
	l, run := startedCalls(t, budget.Limits{}, "c1", "c2")
	l.batch.wmu <- struct{}{} // a batch in progress: what comes now queues
	errs := make(chan error, 3)
	go func() {
		errs <- l.FinishCallLater(ctx, budget.CallFinish{ID: "c1", Status: budget.Succeeded, Usage: budget.Usage{TransferBytes: 100}})
	}()
	go func() { errs <- l.FinishCall(ctx, budget.CallFinish{ID: "nope", Status: budget.Succeeded}) }()
	go func() {
		_, err := l.StartCall(ctx, budget.CallStart{ID: "c3", Run: run, ExecutionID: "x", Tool: "s__t"}, budget.Limits{})
		errs <- err
	}()
	waitQueued(l, 3)
	<-l.batch.wmu // the start leads the next batch, with the finishes in it
	var notFound, ok int
	for range 3 {
		switch err := <-errs; {
		case err == nil:
			ok++
		case errors.Is(err, budget.ErrNotFound):
			notFound++
		default:
			t.Fatalf("unexpected %v", err)
		}
	}
	if ok != 2 || notFound != 1 {
		t.Fatalf("ok %d, not found %d: want the failing write alone to fail", ok, notFound)
	}
	if u := ledgertest.Usage(t, l, run); u.Calls != 3 || u.TransferBytes != 100 {
		t.Fatalf("usage %+v: want 3 calls and c1's 100 bytes", u)
	}
	// A lazy finish with nothing after it: Flush commits it.
	ledgertest.FinishLazilyThenFlush(t, l, "c2")
}

// An execution's start answers the Run's usage with the finishes queued before it counted: its
// batch runs them first, so it needs no flush and no read of its own.
func TestStartExecutionCountsQueuedFinishes(t *testing.T) {
	ctx := t.Context()
	l, run := startedCalls(t, budget.Limits{}, "c1")
	l.batch.wmu <- struct{}{} // a batch in progress: what comes now queues
	finished := make(chan error, 1)
	go func() {
		finished <- l.FinishCallLater(ctx, budget.CallFinish{ID: "c1", Status: budget.Succeeded, Usage: budget.Usage{TransferBytes: 100}})
	}()
	waitQueued(l, 1)
	type started struct {
		u   budget.Usage
		err error
	}
	start := make(chan started, 1)
	go func() {
		u, err := l.StartExecution(ctx, run, "x2", "")
		start <- started{u, err}
	}()
	waitQueued(l, 2)
	<-l.batch.wmu
	if s := <-start; s.err != nil || s.u != (budget.Usage{Calls: 1, TransferBytes: 100}) {
		t.Fatalf("StartExecution = %+v, %v; want c1 and its queued finish's 100 bytes", s.u, s.err)
	}
	if err := <-finished; err != nil {
		t.Fatal(err)
	}
}

// A batch whose writes all succeed runs them without savepoints; when one fails it runs
// again with each in its own: the writes that ran the first time are run afresh, so a refused
// call is recorded once and refused once.
func TestBatchRunsAgainAfresh(t *testing.T) {
	ctx := context.Background()
	l, run := startedCalls(t, budget.Limits{MaxCalls: 1}, "c1")
	l.batch.wmu <- struct{}{} // a batch in progress: what comes now queues
	refused, failed := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := l.StartCall(ctx, budget.CallStart{ID: "c2", Run: run, ExecutionID: "x", Tool: "s__t"}, budget.Limits{MaxCalls: 1})
		refused <- err
	}()
	waitQueued(l, 1)
	go func() { failed <- l.FinishCall(ctx, budget.CallFinish{ID: "nope", Status: budget.Succeeded}) }()
	waitQueued(l, 2)
	<-l.batch.wmu
	if err := <-refused; failure.KindOf(err) != failure.BudgetExceeded {
		t.Fatalf("c2: %v, want budget_exceeded", err)
	}
	if err := <-failed; !errors.Is(err, budget.ErrNotFound) {
		t.Fatalf("finish of an unknown call: %v, want not found", err)
	}
	if rec, err := l.Call(ctx, "c2"); err != nil || rec.Status != budget.Refused {
		t.Fatalf("c2 = %+v, %v; want it recorded refused", rec, err)
	}
	if u := ledgertest.Usage(t, l, run); u.Calls != 1 {
		t.Fatalf("usage %+v: want the one admitted call", u)
	}
}

// A call's finish and the next call's start in one batch write the Run's row once: the
// bytes the finish owes the Run are added in the admission's own update, and they count in
// its check, so bytes that spend the Run's meter refuse the next call, and are kept.
func TestFinishedBytesCountInTheNextAdmission(t *testing.T) {
	ctx := context.Background()
	limits := budget.Limits{MaxTotalBytes: 100}
	l, run := startedCalls(t, limits, "c1")
	l.batch.wmu <- struct{}{} // a batch in progress: what comes now queues
	finished, refused := make(chan error, 1), make(chan error, 1)
	go func() {
		finished <- l.FinishCallLater(ctx, budget.CallFinish{ID: "c1", Status: budget.Succeeded, Usage: budget.Usage{TransferBytes: 100}})
	}()
	waitQueued(l, 1)
	go func() {
		_, err := l.StartCall(ctx, budget.CallStart{ID: "c2", Run: run, ExecutionID: "x", Tool: "s__t"}, limits)
		refused <- err
	}()
	waitQueued(l, 2)
	<-l.batch.wmu
	if err := <-finished; err != nil {
		t.Fatal(err)
	}
	if err := <-refused; failure.KindOf(err) != failure.BudgetExceeded {
		t.Fatalf("c2: %v, want budget_exceeded: c1's 100 bytes spent max_total_bytes", err)
	}
	if u := ledgertest.Usage(t, l, run); u.Calls != 1 || u.TransferBytes != 100 {
		t.Fatalf("usage %+v: want c1 alone and its 100 bytes", u)
	}
	// Under the ceiling, the next call is admitted with the bytes added in the same update.
	if _, err := l.StartCall(ctx, budget.CallStart{ID: "c3", Run: run, ExecutionID: "x", Tool: "s__t"}, budget.Limits{MaxTotalBytes: 1000}); err != nil {
		t.Fatal(err)
	}
	if u := ledgertest.Usage(t, l, run); u.Calls != 2 || u.TransferBytes != 100 {
		t.Fatalf("usage %+v: want two calls and 100 bytes", u)
	}
}

// waitQueued waits until n writes are queued for l's next batch.
func waitQueued(l *Ledger, n int) {
	for {
		l.batch.qmu.Lock()
		queued := len(l.batch.pending)
		l.batch.qmu.Unlock()
		if queued == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// startedCalls is a SQLite ledger holding execution x of Run t/r with the calls ids started
// under limits.
func startedCalls(t *testing.T, limits budget.Limits, ids ...string) (*Ledger, budget.RunRef) {
	t.Helper()
	ctx := t.Context()
	l := openLedger(t, t.TempDir())
	run := budget.RunRef{Tenant: "t", ID: "r"}
	if _, err := l.StartExecution(ctx, run, "x", ""); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, err := l.StartCall(ctx, budget.CallStart{ID: id, Run: run, ExecutionID: "x", Tool: "s__t"}, limits); err != nil {
			t.Fatal(err)
		}
	}
	return l, run
}

func BenchmarkShapeMerge(b *testing.B) {
	ledgertest.BenchmarkShapeMerge(b, benchLedger(b))
}

// Calls that arrive together share a commit even on one P, as `serve` runs (docs/design.md
// §19.4): the first to lead a batch yields before it takes the queue, so the others, already
// runnable, queue their starts first (batch.go).
func TestConcurrentStartsShareACommit(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	ctx := t.Context()
	l, run := startedCalls(t, budget.Limits{})
	const calls = 8
	before := l.batch.commits.Load()
	var wg sync.WaitGroup
	begin := make(chan struct{})
	for i := range calls {
		wg.Go(func() {
			<-begin
			if _, err := l.StartCall(ctx, budget.CallStart{ID: fmt.Sprintf("c%d", i), Run: run, ExecutionID: "x", Tool: "s__t"}, budget.Limits{}); err != nil {
				t.Error(err)
			}
		})
	}
	close(begin)
	wg.Wait()
	if n := l.batch.commits.Load() - before; n > 2 {
		t.Fatalf("%d calls started together took %d commits: want them to share one or two", calls, n)
	}
	if u := ledgertest.Usage(t, l, run); u.Calls != calls {
		t.Fatalf("usage %+v: want %d calls", u, calls)
	}
}
