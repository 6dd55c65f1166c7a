package mcpserver

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget/sqlite"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// TestAgentVersionRecorded: every execution's ledger record carries the version hash of the
// agent whose program it ran.
func TestAgentVersionRecorded(t *testing.T) {
	led, db := ledgerIn(t)
	a := Agent{Tenant: "t", Name: "a", Version: "sha256:feed",
		CodeExecution: &CodeExec{Sandbox: fakeSandbox{run: ok("1")}, Terms: testTerms}}
	cs := connectWith(t, a, &Options{Ledger: led}, nil)
	if res := call(t, cs, "run_code", map[string]any{"code": "1"}); res.IsError {
		t.Fatalf("run_code: %s", testkit.Text(res))
	}
	var version string
	if err := db.QueryRow(`SELECT agent_version FROM executions`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != "sha256:feed" {
		t.Fatalf("recorded agent version %q, want sha256:feed", version)
	}
}

// TestDrainCloseRecordsRunEnds: Drain.Close ends a session the client left open and waits for
// its watcher, so the session's Run is recorded as ended before the ledger closes.
func TestDrainCloseRecordsRunEnds(t *testing.T) {
	led, db := ledgerIn(t)
	d := NewDrain()
	a := Agent{Tenant: "t", Name: "a", CodeExecution: &CodeExec{Sandbox: fakeSandbox{run: ok("1")}, Terms: testTerms}}
	cs := connectWith(t, a, &Options{Ledger: led, Drain: d}, nil)
	if res := call(t, cs, "run_code", map[string]any{"code": "1"}); res.IsError {
		t.Fatalf("run_code: %s", testkit.Text(res))
	}
	d.Stop()
	if !d.Wait(gate.Scaled(5*time.Second)) || !d.Close(gate.Scaled(5*time.Second)) {
		t.Fatal("the drain did not end")
	}
	var open int
	if err := db.QueryRow(`SELECT count(*) FROM runs WHERE ended_at IS NULL`).Scan(&open); err != nil {
		t.Fatal(err)
	}
	if open != 0 {
		t.Errorf("%d runs not recorded as ended after Drain.Close", open)
	}
}

// ledgerIn opens a SQLite ledger in a fresh directory and a read-only view of its file, both
// closed when t ends (after the sessions a test connects, which close first).
func ledgerIn(t *testing.T) (*sqlite.Ledger, *sql.DB) {
	t.Helper()
	dir := t.TempDir()
	led, err := sqlite.Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, sqlite.LedgerFile)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return led, db
}
