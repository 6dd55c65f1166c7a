package binding

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/budget/sqlite"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// stalledLedger is a ledger whose owner stalled past its lease while its calls ran: a
// survivor has recorded every call it finishes unknown (FinishCall finds it no longer
// started), and its lease is overdue when overdue is set.
type stalledLedger struct {
	budget.Ledger
	overdue atomic.Bool
}

func (l *stalledLedger) FinishCall(_ context.Context, f budget.CallFinish) error {
	return fmt.Errorf("%w: call %s is unknown", budget.ErrAlreadyFinished, f.ID)
}

func (l *stalledLedger) LeaseHeldSince() time.Time { return time.Time{} }

func (l *stalledLedger) LeaseHeldUntil() time.Time {
	if l.overdue.Load() {
		return time.Now().Add(-time.Second)
	}
	return time.Now().Add(time.Hour)
}

// TestStalledOwnerWithholdsResults: when the ledger's lease may have lapsed, a call whose
// tool_call_finished finds it recorded unknown has its result withheld; either way the bytes
// that arrived are charged to the Run and the execution, in the ledger and the meter.
func TestStalledOwnerWithholdsResults(t *testing.T) {
	f := newFixture(t)
	base, err := sqlite.Open(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { base.Close() })
	led := &stalledLedger{Ledger: base}
	run := budget.RunRef{Tenant: "t", ID: "r"}
	m, err := budget.Start(context.Background(), led, run, "", "", budget.Limits{MaxCalls: 10})
	if err != nil {
		t.Fatal(err)
	}
	x := New(&Options{Turn: f.turn(t), Meter: m, Tenant: "t", Logger: discard()})

	led.overdue.Store(true)
	r := x.CallTool(context.Background(), "up__echo", json.RawMessage(`{"s":"secret result"}`))
	if r.Kind != failure.UpstreamError || !strings.Contains(r.Message, "withheld") || strings.Contains(string(r.Value), "secret") {
		t.Fatalf("a result recorded unknown: %+v", r)
	}
	x.Wait()
	_, runUse, err := m.Usage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if runUse.ProducedBytes == 0 || runUse.Calls != 1 {
		t.Errorf("run usage %+v: the withheld call's bytes escaped the meters", runUse)
	}
	first := runUse.ProducedBytes

	// With the lease surely held the result goes as before (finished after the reply); the
	// bytes are charged all the same when the record turns out to be closed.
	led.overdue.Store(false)
	if r := x.CallTool(context.Background(), "up__echo", json.RawMessage(`{"s":"b"}`)); r.Kind != "" {
		t.Fatalf("a call under a held lease: %+v", r)
	}
	x.Wait()
	if _, runUse, _ := m.Usage(context.Background()); runUse.ProducedBytes <= first || runUse.TransferBytes == 0 {
		t.Errorf("run usage %+v after the second call", runUse)
	}
}
