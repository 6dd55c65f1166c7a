package ledgertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

// RunLedgerContractAt runs RunLedgerContract on ledgers open makes at a place fresh makes (a
// directory, a database schema); reopening a ledger opens its place again.
func RunLedgerContractAt(t *testing.T, fresh func(t *testing.T) string, open func(t *testing.T, at string) budget.Ledger) {
	places := map[budget.Ledger]string{}
	RunLedgerContract(t,
		func(t *testing.T) budget.Ledger {
			at := fresh(t)
			l := open(t, at)
			places[l] = at
			return l
		},
		func(t *testing.T, l budget.Ledger) budget.Ledger { return open(t, places[l]) })
}

// CrashPlaceEnv and CrashMarkerEnv name what a crash child reads: the place of its ledger,
// and the file it makes once its call is started.
const (
	CrashPlaceEnv  = "BUDGET_CRASH_CHILD"
	CrashMarkerEnv = "BUDGET_CRASH_MARKER"
)

// CrashChild is the body of a test run as a child by KillChild: it opens a ledger at the place
// CrashPlaceEnv names, starts call c_child of execution x of Run t/r, makes the file
// CrashMarkerEnv names, and kills its own process (SIGKILL: no Close, no deferred cleanup).
// It never returns; it exits 3 when the ledger fails it.
func CrashChild(open func(ctx context.Context, place string) (budget.Ledger, error)) {
	ctx := context.Background()
	l, err := open(ctx, os.Getenv(CrashPlaceEnv))
	if err != nil {
		os.Exit(3)
	}
	run := budget.RunRef{Tenant: "t", ID: "r"}
	if _, err := l.StartExecution(ctx, run, "x", ""); err != nil {
		os.Exit(3)
	}
	if _, err := l.StartCall(ctx, budget.CallStart{ID: "c_child", Run: run, ExecutionID: "x", Tool: "slow"}, budget.Limits{}); err != nil {
		os.Exit(3)
	}
	_ = os.WriteFile(os.Getenv(CrashMarkerEnv), nil, 0o600)
	p, _ := os.FindProcess(os.Getpid())
	_ = p.Kill()
	select {}
}

// KillChild runs this test binary's test as a child whose ledger is at place (the test calls
// CrashChild when CrashPlaceEnv is set), and fails t unless the child started its call and
// was killed.
func KillChild(t *testing.T, test, place string) {
	t.Helper()
	marker := filepath.Join(t.TempDir(), "started")
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), CrashPlaceEnv+"="+place, CrashMarkerEnv+"="+marker)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("child exited cleanly; want killed. output:\n%s", out)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("child never started its call: %v\n%s", err, out)
	}
}

// Opened is the ledger l an Open returned with err: it fails t on err, and closes l when t
// ends.
func Opened[L budget.Ledger](t testing.TB, l L, err error) L {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}
