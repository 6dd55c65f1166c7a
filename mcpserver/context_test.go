package mcpserver

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/execution"
	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
)

// TestRunCodeContextEconomy: every run_code result reports what its program received from
// bindings, what came back to the model (the text it reads) and the difference, per execution
// and, counted from the ledger, per Run; the ledger keeps each execution's figures.
func TestRunCodeContextEconomy(t *testing.T) {
	led, db := ledgerIn(t)
	var received int64
	calls := func(ctx context.Context, ex engine.Execution) *engine.Outcome {
		received = 0
		for range 3 { // a built-in answers from the catalogue: no upstream needed
			rep := ex.Tools.CallTool(ctx, "list_tools", json.RawMessage(`{}`))
			if rep.Kind != "" {
				t.Errorf("list_tools: %s: %s", rep.Kind, rep.Message)
			}
			received += int64(len(rep.Value))
		}
		return ok(`"short"`)(ctx, ex)
	}
	a := Agent{Tenant: "t", Name: "a", CodeExecution: &CodeExec{Sandbox: fakeSandbox{run: calls}, Terms: testTerms}}
	cs := connectWith(t, a, &Options{Ledger: led}, nil)
	var runTotal telemetry.Context
	for i := range 2 {
		res := call(t, cs, ToolRunCode, map[string]any{"code": "..."})
		b, _ := json.Marshal(res.Meta[MetaReport])
		var r execution.Result
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		// What a host hands its model of a completed result: its structured content as the host
		// writes it back.
		returned := int64(len(hostJSON(res.StructuredContent)))
		want := telemetry.Context{BindingBytes: received, ReturnedBytes: returned, KeptOutBytes: max(received-returned, 0)}
		if received == 0 || r.Context.Execution != want {
			t.Fatalf("run %d: context.execution = %+v, want %+v", i, r.Context.Execution, want)
		}
		runTotal = telemetry.Context{BindingBytes: runTotal.BindingBytes + want.BindingBytes,
			ReturnedBytes: runTotal.ReturnedBytes + want.ReturnedBytes, KeptOutBytes: runTotal.KeptOutBytes + want.KeptOutBytes}
		if r.Context.Run != runTotal {
			t.Fatalf("run %d: context.run = %+v, want the session's sum %+v", i, r.Context.Run, runTotal)
		}
	}
	var binding, returned, keptOut int64
	if err := db.QueryRow(`SELECT sum(binding_bytes), sum(returned_bytes), sum(kept_out_bytes) FROM executions`).Scan(&binding, &returned, &keptOut); err != nil {
		t.Fatal(err)
	}
	if got := (telemetry.Context{BindingBytes: binding, ReturnedBytes: returned, KeptOutBytes: keptOut}); got != runTotal {
		t.Fatalf("ledger holds %+v, want %+v", got, runTotal)
	}
}
