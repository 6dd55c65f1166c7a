package binding

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// TestToolCallsSayWhatHappened: an execution's tool_calls list its calls in order with how
// each ended (ok, denied, error with its kind, and unknown for one cut off after it went out,
// read while it is still in flight and after), built-ins left out; past ShownCalls the
// earliest are counted, not listed.
func TestToolCallsSayWhatHappened(t *testing.T) {
	f := newFixture(t)
	x := newExecution(t, budget.Limits{})
	x.turn = f.turn(t)
	callOf(t, x, "list_tools", `{}`)
	callOf(t, x, "up__echo", `{"s":"a"}`)
	wantKind(t, callOf(t, x, "up__secret", `{}`), failure.Denied)
	wantKind(t, callOf(t, x, "up__echo", `{"s":1}`), failure.InvalidArguments)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		x.CallTool(ctx, "up__slow", json.RawMessage(`{"seconds":60}`))
	}()
	deadline := time.Now().Add(gate.Scaled(30 * time.Second))
	for f.inFlight.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	want := []CallSummary{
		{Seq: 2, Tool: "up__echo", Outcome: CallOK},
		{Seq: 3, Tool: "up__secret", Outcome: CallDenied, Kind: failure.Denied},
		{Seq: 4, Tool: "up__echo", Outcome: CallError, Kind: failure.InvalidArguments},
		{Seq: 5, Tool: "up__slow", Outcome: CallUnknown},
	}
	if got, omitted := x.ToolCalls(); omitted != 0 || !cmp.Equal(got, want) {
		t.Errorf("while up__slow runs: tool_calls (omitted %d) -want +got:\n%s", omitted, cmp.Diff(want, got))
	}
	cancel()
	<-done
	want[3].Kind = failure.Cancelled
	if got, _ := x.ToolCalls(); !cmp.Equal(got, want) {
		t.Errorf("after up__slow was cancelled mid-call: -want +got:\n%s", cmp.Diff(want, got))
	}

	for range ShownCalls {
		callOf(t, x, "up__secret", `{}`)
	}
	x.Wait()
	got, omitted := x.ToolCalls()
	if len(got) != ShownCalls || omitted != 4 || got[0].Seq != 6 || got[ShownCalls-1].Seq != 5+ShownCalls {
		t.Errorf("past %d calls: %d listed from seq %d, %d omitted; want the last %d and 4 omitted", ShownCalls, len(got), got[0].Seq, omitted, ShownCalls)
	}
}

// TestNotedCallsBeforeAdmission: a call waiting for a slot is noted open and not made, under
// the id its record takes once it is admitted, so a task's note relates it to that record.
func TestNotedCallsBeforeAdmission(t *testing.T) {
	f := newFixture(t)
	x, led := newExecutionLedger(t, budget.Limits{})
	x.turn = f.turn(t)
	x.slots = make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { x.CallTool(ctx, "up__slow", json.RawMessage(`{"seconds":60}`)) })
	deadline := time.Now().Add(gate.Scaled(30 * time.Second))
	for f.inFlight.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	wg.Go(func() { x.CallTool(context.Background(), "up__echo", json.RawMessage(`{"s":"b"}`)) })
	n := x.NotedCalls()
	for (len(n.IDs) < 2 || n.IDs[1] == "") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		n = x.NotedCalls()
	}
	if len(n.Calls) != 2 || n.Made != 1 || !n.Spent(0) || n.Spent(1) || !n.OpenAt(1) || n.IDs[1] == "" ||
		n.Calls[1].Outcome != CallError || n.Calls[1].Kind != failure.Cancelled {
		t.Fatalf("while up__echo waits for a slot, noted: %+v; want it open, not made, with an id", n)
	}
	cancel()
	wg.Wait()
	records, err := led.Calls(context.Background(), budget.RunRef{Tenant: "t", ID: "r"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range records {
		if r.ID == n.IDs[1] && r.Spent && r.Tool == "up__echo" {
			return
		}
	}
	t.Errorf("no spent record of up__echo under its noted id %s among %+v", n.IDs[1], records)
}
