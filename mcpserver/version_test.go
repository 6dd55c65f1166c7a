package mcpserver

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

// TestAgentVersionRecorded: every execution's ledger record carries the version hash of the
// agent whose program it ran.
func TestAgentVersionRecorded(t *testing.T) {
	dir := t.TempDir()
	led, err := budget.OpenSQLite(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	a := Agent{Tenant: "t", Name: "a", Version: "sha256:feed",
		CodeExecution: &CodeExec{Sandbox: fakeSandbox{run: ok("1")}, Terms: testTerms}}
	cs := connectWith(t, a, &Options{Ledger: led}, nil)
	if res := call(t, cs, "run_code", map[string]any{"code": "1"}); res.IsError {
		t.Fatalf("run_code: %s", text(res))
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, budget.LedgerFile)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var version string
	if err := db.QueryRow(`SELECT agent_version FROM executions`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != "sha256:feed" {
		t.Fatalf("recorded agent version %q, want sha256:feed", version)
	}
}
