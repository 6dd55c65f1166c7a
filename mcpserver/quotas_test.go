package mcpserver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// TestQuotasExecutions: slots are taken from the tenant, then the server; a waiter gets the
// slot that frees, in order; a tenant that does not wait is refused at once, naming whose
// limit; a cancelled wait is cancelled; Load counts what runs and what waits.
func TestQuotasExecutions(t *testing.T) {
	q := NewQuotas(Quota{MaxExecutions: 2}, map[string]Quota{"a": {MaxExecutions: 1, Wait: time.Minute}}, Quota{MaxExecutions: 1})
	ctx := context.Background()
	releaseA, fail := q.startExecution(ctx, "a")
	if fail != nil {
		t.Fatal(fail)
	}
	got := make(chan func(), 1)
	go func() {
		r, fail := q.startExecution(ctx, "a")
		if fail != nil {
			t.Error(fail)
			r = func() {}
		}
		got <- r
	}()
	if !waitUntil(gate.Scaled(10*time.Second), func() bool { return q.Load("a") == Load{Running: 1, Queued: 1} }) {
		t.Fatalf("load of a = %+v, want one running and one queued", q.Load("a"))
	}
	releaseX, fail := q.startExecution(ctx, "x")
	if fail != nil {
		t.Fatal(fail)
	}
	if _, fail := q.startExecution(ctx, "x"); fail == nil || fail.Kind != failure.CapacityExceeded || !strings.Contains(fail.Message, `tenant "x" has its limit of 1`) {
		t.Errorf("x's second program: %+v, want capacity_exceeded naming x's limit", fail)
	}
	if _, fail := q.startExecution(ctx, "y"); fail == nil || fail.Kind != failure.CapacityExceeded || !strings.Contains(fail.Message, "the server has its limit of 2") {
		t.Errorf("y's program with the server full: %+v, want capacity_exceeded naming the server's limit", fail)
	}
	if l := q.Load(""); l != (Load{Running: 2, Queued: 1}) {
		t.Errorf("server load %+v, want 2 running and 1 queued", l)
	}
	releaseA()
	releaseA() // a release is idempotent
	second := <-got
	if l := q.Load("a"); l != (Load{Running: 1}) {
		t.Errorf("load of a after the first ended: %+v, want the waiter running", l)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, fail := q.startExecution(cctx, "a"); fail == nil || fail.Kind != failure.Cancelled {
		t.Errorf("a cancelled wait: %+v, want cancelled", fail)
	}
	second()
	releaseX()
	if l := q.Load(""); l != (Load{}) {
		t.Errorf("server load at the end %+v, want nothing", l)
	}
	var nilQ *Quotas
	if r, fail := nilQ.startExecution(ctx, "a"); fail != nil || r == nil {
		t.Errorf("nil Quotas: %v", fail)
	}
}
