package ledgertest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
)

// contractExecutions: a ledger keeps each execution's record, its end with what its egress
// proxy decided (egress.Stats.Record's JSON, held byte for byte) included, and other (a second opener of the same store, or l itself) reads it back: a
// running execution has no end, one without network rules has no network block, an
// execution ended twice keeps its last end, and an unknown id is ErrNotFound.
func contractExecutions(t *testing.T, l, eo budget.Ledger) {
	ctx := t.Context()
	run := budget.RunRef{Tenant: "t", ID: "r"}
	before := time.Now().Add(-time.Hour)

	// x1 ends through its Meter, as execution.Execute ends it, with a call and a network block.
	m, err := budget.Start(ctx, l, run, "x1", "sha256:agent", budget.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	tk, fe := m.Admit(ctx, budget.Call{Tool: "srv__tool", ArgumentBytes: 10})
	if fe != nil {
		t.Fatal(fe)
	}
	if err := tk.Finish(ctx, budget.CallFinish{Status: budget.Succeeded, Usage: budget.Usage{TransferBytes: 70}}); err != nil {
		t.Fatal(err)
	}
	network := json.RawMessage(`{"allowed":3,"refused":12,"refusals":[{"host":"other.test","port":443,"reason":"not_allowed","times":10},` +
		`{"host":"10.0.0.1","port":80,"reason":"ip_literal","times":1}],"bytes_in":4096,"bytes_out":512}`)
	m.NoteNetwork(network)
	c := telemetry.Context{BindingBytes: 70, ReturnedBytes: 20, KeptOutBytes: 50}
	if _, err := m.End(ctx, "completed", json.RawMessage(`[{"name":"stdout"}]`), c); err != nil {
		t.Fatal(err)
	}
	got, err := eo.Execution(ctx, "x1")
	if err != nil {
		t.Fatal(err)
	}
	want := budget.ExecutionRecord{ID: "x1", Run: run, AgentVersion: "sha256:agent", Status: "completed",
		Usage: budget.Usage{Calls: 1, TransferBytes: 70}, Attachments: json.RawMessage(`[{"name":"stdout"}]`), Context: c, Network: network}
	ignoreTime := cmpopts.IgnoreFields(budget.ExecutionRecord{}, "StartedAt", "EndedAt")
	if d := cmp.Diff(want, got, ignoreTime); d != "" {
		t.Errorf("Execution(x1) (-want +got):\n%s", d)
	}
	if got.StartedAt.Before(before) || got.EndedAt.Before(got.StartedAt) {
		t.Errorf("started %v, ended %v; want about now, in order", got.StartedAt, got.EndedAt)
	}

	// x2 runs without rules: no network block. x3 is still running.
	StartExecution(t, l, run, "x2")
	if _, err := l.EndExecution(ctx, budget.ExecutionEnd{ID: "x2", Status: "timeout"}); err != nil {
		t.Fatal(err)
	}
	if x, err := eo.Execution(ctx, "x2"); err != nil || x.Network != nil || x.Status != "timeout" || x.EndedAt.IsZero() {
		t.Errorf("Execution(x2) = %+v, %v; want timeout, ended, no network block", x, err)
	}
	// x3, still running, counts its calls already: one finished, one in flight, and bytes
	// charged outside any call.
	m3, err := budget.Start(ctx, l, run, "x3", "", budget.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	done, fe := m3.Admit(ctx, budget.Call{Tool: "srv__tool"})
	if fe != nil {
		t.Fatal(fe)
	}
	if err := done.Finish(ctx, budget.CallFinish{Status: budget.Succeeded, Usage: budget.Usage{TransferBytes: 30, ProducedBytes: 40}}); err != nil {
		t.Fatal(err)
	}
	inFlight, fe := m3.Admit(ctx, budget.Call{Tool: "srv__tool"})
	if fe != nil {
		t.Fatal(fe)
	}
	if err := m3.Charge(ctx, budget.Usage{PreservedBytes: 5}); err != nil {
		t.Fatal(err)
	}
	x, err := eo.Execution(ctx, "x3")
	if err != nil || x.Status != "running" || !x.EndedAt.IsZero() || x.Network != nil ||
		x.Usage != (budget.Usage{Calls: 2, TransferBytes: 30, ProducedBytes: 40, PreservedBytes: 5}) {
		t.Errorf("Execution(x3) = %+v, %v; want running, no end, 2 calls, 30 bytes in, 40 produced, 5 preserved", x, err)
	}
	if err := inFlight.Finish(ctx, budget.CallFinish{Status: budget.Failed, Kind: "upstream_error"}); err != nil {
		t.Fatal(err)
	}

	// Ended again (an end recorded twice): the last end stands, its network block as it was.
	if _, err := l.EndExecution(ctx, budget.ExecutionEnd{ID: "x3", Status: "completed", Network: json.RawMessage(`{"allowed":1}`)}); err != nil {
		t.Fatal(err)
	}
	last := json.RawMessage(`{"allowed":2,"refused":0,"refusals":[],"bytes_in":0,"bytes_out":0}`)
	if _, err := l.EndExecution(ctx, budget.ExecutionEnd{ID: "x3", Status: "completed", Network: last}); err != nil {
		t.Fatal(err)
	}
	x, err = eo.Execution(ctx, "x3")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(last, x.Network); d != "" {
		t.Errorf("Execution(x3).Network after two ends (-want +got):\n%s", d)
	}
	if _, err := eo.Execution(ctx, "nope"); !errors.Is(err, budget.ErrNotFound) {
		t.Errorf("Execution(unknown) = %v, want ErrNotFound", err)
	}
}

// BenchmarkExecutionLedger measures what the run ledger costs one execution as
// execution.Execute records it through its Meter: its start (the Run's usage with it), the
// Run's usage read for the result, its end (the Run's context economy with it), in a Run that
// grows by one execution a loop.
func BenchmarkExecutionLedger(b *testing.B, l budget.Ledger) {
	ctx := b.Context()
	run := budget.RunRef{Tenant: "t", ID: budget.NewID("r_")}
	limits := budget.Limits{MaxCalls: 1 << 40}
	c := telemetry.Context{BindingBytes: 3, ReturnedBytes: 1, KeptOutBytes: 2}
	n := int64(0)
	for b.Loop() {
		n++
		m, err := budget.Start(ctx, l, run, "", "sha256:bench", limits)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := m.Usage(ctx); err != nil {
			b.Fatal(err)
		}
		got, err := m.End(ctx, "completed", nil, c)
		if err != nil || got.KeptOutBytes != 2*n {
			b.Fatalf("the Run's context after %d executions = %+v, %v", n, got, err)
		}
	}
}
