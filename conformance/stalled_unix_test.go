//go:build unix

package conformance

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/internal/pgdb/pgtest"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// stalledSlowSeconds is how long the upstream call of TestReplicaStalledPastItsLease takes:
// past the stall (a survivor records the call unknown within about a lease and a quarter),
// so its answer reaches the replica after it has resumed and taken its lease back.
const stalledSlowSeconds = 15

// TestReplicaStalledPastItsLease (issue 38: the third review only read it): a replica stopped
// (SIGSTOP: a long GC pause, a frozen VM) while its program's call is at the upstream, for
// longer than its lease, has the call recorded unknown by a survivor; resumed, it takes a new
// lease, and when the answer comes the program is told the result is withheld (the ledger
// holds the call as never answered), not given it. The call stays unknown, spent, and was
// made once.
func TestReplicaStalledPastItsLease(t *testing.T) {
	c := &cluster{dsn: pgtest.Schema(t)}
	c.mock = startHTTPMock(t) + "/mcp"
	cfg := testkit.WriteConfig(t, replicaConfig(c.mock))
	victim, survivor := startReplica(t, "stalled", cfg, c.dsn), startReplica(t, "survivor", cfg, c.dsn)
	c.url = "http://" + victim.addr + "/mcp"
	cs, _ := c.connectVia(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	type reply struct {
		value string
		err   error
	}
	done := make(chan reply, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_code", Meta: mcp.Meta{"mcp-sandbox/run": "stalled"},
			Arguments: map[string]any{"code": fmt.Sprintf(`
try:
    return "delivered: " + str(await support__slow(seconds=%d))
except ToolError as e:
    return e.kind + ": " + str(e)
`, stalledSlowSeconds)}})
		var out struct{ Value string }
		if err == nil {
			_, err = structured(res, &out)
		}
		done <- reply{out.Value, err}
	}()
	db := c.db(t)
	var callID string
	if !waitFor(60*time.Second, func() bool {
		return db.QueryRow(ctx, `SELECT id FROM ledger_calls WHERE run_id = 'named:stalled' AND status = 'started'`).Scan(&callID) == nil
	}) {
		t.Fatal("the slow call was never started")
	}
	if err := victim.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = victim.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	defer resume()
	var status string
	if !waitFor(4*leaseSeconds*time.Second, func() bool {
		return db.QueryRow(ctx, `SELECT status FROM ledger_calls WHERE id = $1`, callID).Scan(&status) == nil && status == "unknown"
	}) {
		t.Fatalf("call %s is %q %v into the stall: no survivor recorded it unknown", callID, status, time.Since(stopped))
	}
	resume()
	stall := time.Since(stopped)
	t.Logf("the replica was stopped %v; %s recorded call %s unknown meanwhile", stall.Round(time.Millisecond), survivor.name, callID)
	if stall > (stalledSlowSeconds-3)*time.Second {
		t.Logf("the stall outlasted most of the call: its answer may have come before the lease was taken back")
	}
	var r reply
	select {
	case r = <-done:
	case <-ctx.Done():
		t.Fatal("the program never ended")
	}
	if r.err != nil || !strings.HasPrefix(r.value, "upstream_error: ") || !strings.Contains(r.value, "withheld") || strings.Contains(r.value, "delivered") {
		t.Errorf("the stalled replica's program heard %q (%v), want its result withheld", r.value, r.err)
	}
	if !strings.Contains(victim.log.String(), "a call's result withheld") {
		t.Errorf("the stalled replica did not log the withheld result:\n%s", victim.log)
	}
	if db.QueryRow(ctx, `SELECT status FROM ledger_calls WHERE id = $1`, callID).Scan(&status); status != "unknown" {
		t.Errorf("call %s is %q after the answer came, want it to stay unknown", callID, status)
	}
	if n := c.mockCounts(t)["slow"]; n != 1 {
		t.Errorf("the mock received the slow call %d times, want 1", n)
	}
}
