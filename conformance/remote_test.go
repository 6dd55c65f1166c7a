package conformance

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	_ "modernc.org/sqlite"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/budget/sqlite"
	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// Remote sandboxes (issue 15): the built binary as a sandbox service, and as the MCP server
// whose remote profile sends it programs.

const sandboxToken = "conformance-sandbox-token"

// sandboxService starts `mcp-sandbox sandbox-service` on listen (127.0.0.1:0 for a fresh
// port) and returns its address and its log. It holds no upstream and no tenant.
func sandboxService(t *testing.T, listen string) (addr string, cmd *exec.Cmd, log *testkit.Log) {
	t.Helper()
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
profiles:
  default: {backend: local, isolation: process, allow_same_uid: true, hard_limits: {wall_seconds: 90}}
sandbox_service: {tokens: [%q], profile: default}
`, configs.HashToken(sandboxToken)))
	cmd = exec.Command(built.sandbox, "sandbox-service", "--listen", listen, "--config", cfg)
	log = testkit.NewLog(t, "server")
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	re := regexp.MustCompile(`msg="serving sandbox executions" addr=(\S+)`)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		m := re.FindStringSubmatch(log.String())
		if m != nil {
			return m[1], cmd, log
		}
		if time.Now().After(deadline) {
			t.Fatal("the sandbox service did not start")
		}
	}
}

// remoteServe starts `serve` for tenant t, whose programs run on the sandbox service at
// addr, with the mock as upstream "support" and a ledger of its own. It returns the session,
// the mock's counter file and the data dir.
func remoteServe(t *testing.T, addr string) (cs *mcp.ClientSession, counter, dataDir string) {
	t.Helper()
	dir := t.TempDir()
	counter, dataDir = filepath.Join(dir, "counter.json"), filepath.Join(dir, "data")
	t.Setenv("MCP_SANDBOX_CONFORMANCE_TOKEN", sandboxToken)
	cs, _ = serve(t, fmt.Sprintf(`
data_dir: %q
profiles:
  default:
    backend: remote
    isolation: process
    hard_limits: {wall_seconds: 90}
    remote: {url: "http://%s", bearer: {env: MCP_SANDBOX_CONFORMANCE_TOKEN}}
`, dataDir, addr)+supportTenant(counter), nil)
	return cs, counter, dataDir
}

// callRunCode runs code and returns run_code's structured result, failed or not.
func callRunCode(t *testing.T, cs *mcp.ClientSession, code string) fullResult {
	t.Helper()
	b := runCodeIn(t, cs, "", code)
	var r fullResult
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("structuredContent %s: %v", b, err)
	}
	return r
}

type ledgerCall struct{ Tool, Status, Kind string }

// ledgerCalls reads the tool calls the serve process recorded in its SQLite ledger.
func ledgerCalls(t *testing.T, dataDir string) []ledgerCall {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dataDir, sqlite.LedgerFile)+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT tool, status, kind FROM tool_calls ORDER BY started_at, id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []ledgerCall
	for rows.Next() {
		var c ledgerCall
		if err := rows.Scan(&c.Tool, &c.Status, &c.Kind); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

// Must show 3: a program's binding call travels serve → remote → sandbox service → child →
// back through the caller's policy and ledger. The value is 42, the caller's ledger holds one
// record, the mock was called once, and the service's log knows nothing of the upstream.
func TestRemoteBindingGoesThroughTheCaller(t *testing.T) {
	addr, _, svcLog := sandboxService(t, "127.0.0.1:0")
	cs, counter, dataDir := remoteServe(t, addr)
	var got float64
	run(t, cs, `return (await support__add(a=40, b=2))["sum"]`, &got)
	if got != 42 {
		t.Errorf("value %v, want 42", got)
	}
	if calls := ledgerCalls(t, dataDir); len(calls) != 1 || calls[0].Tool != "support__add" || calls[0].Status != string(budget.Succeeded) {
		t.Errorf("the caller's ledger holds %+v, want one succeeded support__add", calls)
	}
	if n := counts(t, counter)["add"]; n != 1 {
		t.Errorf("the mock ran add %d times, want 1", n)
	}
	// The service logs the execution's end after the stream's last frame has left it, so the
	// line may still be on its way when run_code has answered: wait for it, bounded.
	var log string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		log = svcLog.String()
		if strings.Contains(log, "execution ended") || time.Now().After(deadline) {
			break
		}
	}
	if !strings.Contains(log, "execution ended") {
		t.Errorf("the program did not run on the sandbox service:\n%s", log)
	}
	for _, s := range []string{"support", "upstream", "__"} {
		if strings.Contains(log, s) {
			t.Errorf("the sandbox service's log mentions %q:\n%s", s, log)
		}
	}
}

// Must show 4: killing the sandbox service mid-execution is provider_error, never a retry
// (the mock's counter stays at what the program reached), and once the service is back the
// next execution works.
func TestRemoteServiceKilledMidExecution(t *testing.T) {
	addr, svc, _ := sandboxService(t, "127.0.0.1:0")
	cs, counter, _ := remoteServe(t, addr)

	done := make(chan fullResult, 1)
	go func() {
		done <- callRunCode(t, cs, "import time\nfirst = await support__lookup(sku=\"K1\")\ntime.sleep(60)\nreturn first")
	}()
	for deadline := time.Now().Add(60 * time.Second); counts(t, counter)["lookup"] == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the program's call never reached the mock")
		}
	}
	if err := svc.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var r fullResult
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("run_code did not return within 30 s of the service's death")
	}
	if r.Failure == nil || r.Failure.Kind != "provider_error" {
		t.Fatalf("want provider_error, got %+v", r.Failure)
	}
	t.Logf("provider_error %s after the kill: %s", time.Since(start).Round(time.Millisecond), r.Failure.Message)
	time.Sleep(time.Second)
	if c := counts(t, counter); c["lookup"] != 1 || len(c) != 1 {
		t.Errorf("mock counts %v: want lookup exactly once (the execution was not retried)", c)
	}

	_ = svc.Wait()
	sandboxService(t, addr) // back, on the same address
	var got float64
	run(t, cs, `return (await support__add(a=40, b=2))["sum"]`, &got)
	if got != 42 {
		t.Errorf("after the restart: value %v, want 42", got)
	}
	if c := counts(t, counter); c["lookup"] != 1 || c["add"] != 1 {
		t.Errorf("mock counts %v after the restart", c)
	}
}
