package binding

import (
	"context"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// TestBuiltinsMetered is the review's scenario: a program calling list_tools and
// get_tool_info 600 times under a budget of 5 calls and 20 KB. Each built-in call counts as a
// call and its answer as transfer, per execution and per Run, like any binding call: 5 are
// answered, within 20 KB, and the rest are budget_exceeded; the ledger holds each spent one.
func TestBuiltinsMetered(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	limits := budget.Limits{MaxCalls: 5, MaxTotalBytes: 20_000}
	x, led := newExecutionLedger(t, limits)
	x.turn = f.turn(t)
	var answered, crossed int64
	kinds := map[failure.Kind]int{}
	for i := range 600 {
		name, args := "list_tools", `{}`
		if i%2 == 1 {
			name, args = "get_tool_info", `{"name":"up__echo"}`
		}
		r := callOf(t, x, name, args)
		if r.Kind == "" {
			answered++
			crossed += int64(len(r.Value))
			continue
		}
		kinds[r.Kind]++
	}
	x.Wait()
	if answered != 5 || crossed > limits.MaxTotalBytes {
		t.Errorf("%d built-in calls answered, %d bytes crossed; want 5 within %d bytes", answered, crossed, limits.MaxTotalBytes)
	}
	if kinds[failure.BudgetExceeded] != 595 {
		t.Errorf("refusals %v, want 595 budget_exceeded", kinds)
	}
	exec, run, err := x.meter.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if exec.Calls != 5 || run.Calls != 5 || exec.TransferBytes != crossed || run.TransferBytes != crossed {
		t.Errorf("usage: execution %+v, run %+v; want 5 calls and %d bytes each", exec, run, crossed)
	}
	// The Run is spent: the next program of the same Run gets no fresh allowance.
	m2, err := budget.Start(ctx, led, budget.RunRef{Tenant: "t", ID: "r"}, "", "", limits)
	if err != nil {
		t.Fatal(err)
	}
	y := New(&Options{Turn: x.turn, Meter: m2, Tenant: "t", Logger: discard()})
	wantKind(t, callOf(t, y, "list_tools", `{}`), failure.BudgetExceeded)
	y.Wait()
}

// TestBuiltinsTransferCeiling: a built-in's answer counts on the transfer meter: one over
// what is left is refused (spent, since it was admitted), and an invalid request is refused
// before admission, like a tool call with invalid arguments.
func TestBuiltinsTransferCeiling(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	x := newExecution(t, budget.Limits{MaxCalls: 100, MaxTotalBytes: 64})
	x.turn = f.turn(t)
	wantKind(t, callOf(t, x, "list_tools", `{"bogus":1}`), failure.InvalidArguments)
	wantKind(t, callOf(t, x, "get_tool_info", `{"name":"up__nope"}`), failure.Unavailable)
	wantKind(t, callOf(t, x, "list_tools", `{}`), failure.BudgetExceeded)
	x.Wait()
	exec, _, err := x.meter.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if exec.Calls != 1 || exec.TransferBytes != 0 {
		t.Errorf("usage %+v, want the one admitted call and no bytes", exec)
	}
}
