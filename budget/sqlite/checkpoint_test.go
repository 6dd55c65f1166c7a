package sqlite

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

// TestCheckpointOffTheCommit: no connection checkpoints inside a commit (wal_autocheckpoint
// 0), and the checkpointer, poked by commits, copies what the WAL holds into the database
// file, so the WAL starts over rather than grow; a second ledger on the file reads every
// commit, checkpointed or not.
func TestCheckpointOffTheCommit(t *testing.T) {
	dir := t.TempDir()
	heard := make(chan int, 64)
	l, err := Open(t.Context(), dir, &Options{checkpointed: heard})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var auto int
	if err := l.db.QueryRowContext(t.Context(), `PRAGMA wal_autocheckpoint`).Scan(&auto); err != nil || auto != 0 {
		t.Fatalf("wal_autocheckpoint = %d (%v), want 0", auto, err)
	}
	run := budget.RunRef{Tenant: "t", ID: "r"}
	if _, err := l.StartExecution(t.Context(), run, "x", "v"); err != nil {
		t.Fatal(err)
	}
	limits := budget.Limits{MaxCalls: 1000}
	const calls = 50
	for i := range calls {
		if _, err := l.StartCall(t.Context(), budget.CallStart{ID: fmt.Sprintf("c%d", i), Run: run, ExecutionID: "x", Tool: "s__t"}, limits); err != nil {
			t.Fatal(err)
		}
	}
	// The checkpointer hears at least the first commit's poke; each checkpoint it reports
	// held frames, and copied them (PASSIVE copies all when no reader pins them).
	select {
	case frames := <-heard:
		if frames <= 0 {
			t.Errorf("a checkpoint reported %d frames, want some", frames)
		}
	case <-t.Context().Done():
		t.Fatal("no checkpoint ran")
	}
	st, err := os.Stat(filepath.Join(dir, LedgerFile))
	if err != nil || st.Size() == 0 {
		t.Fatalf("the database file after a checkpoint: %v, %v", st, err)
	}
	other := openLedger(t, dir)
	u, err := other.RunUsage(t.Context(), run)
	if err != nil || u.Calls != calls {
		t.Errorf("another ledger reads %d calls (%v), want %d", u.Calls, err, calls)
	}
}
