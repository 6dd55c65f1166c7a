package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/binding"
	"github.com/mcp-sandbox/mcp-sandbox/cassette"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// threeCallsThenRaise makes a call that succeeds, one the policy denies and one the tool
// fails, then raises: a program that failed halfway through its effects.
const threeCallsThenRaise = `await mock__add(a=1, b=2)
try:
    await call_tool("mock__class", {})
except Exception:
    pass
try:
    await mock__fail()
except Exception:
    pass
raise RuntimeError("gave up after three calls")`

// TestFailedResultSaysWhatHappened (must show 5 of issue 41): a program that makes three calls
// (ok, denied, error) and then raises, run by the built binary's serve: the text the model
// reads lists the three in order with their outcomes, the report in _meta holds the same
// tool_calls, and so does the result line of the cassette `export` writes from the ledger.
func TestFailedResultSaysWhatHappened(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(120*time.Second))
	defer cancel()
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
data_dir: %q
cassettes: {record: true}
profiles:
  default: {backend: process, isolation: process, allow_same_uid: true, hard_limits: {wall_seconds: 60}}
upstreams:
  mock: {command: [%q]}
tenants:
  t:
    upstreams: [mock]
    policy: {deny: ["mock__class"]}
    agents:
      a: {code_execution: {profile: default}}
`, filepath.Join(t.TempDir(), "data"), testkit.MockUpstream(t)))
	cs := connectStdio(t, []string{"--config", cfg}, nil)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": threeCallsThenRaise},
		Meta: mcp.Meta{"mcp-sandbox/run": "halfway"}})
	if err != nil || !res.IsError {
		t.Fatalf("run_code: %v, want a failed result: %s", err, testkit.Text(res))
	}
	text := testkit.Text(res)
	for _, line := range []string{"tool_calls (3):\n", "  1 mock__add: ok\n", "  2 mock__class: denied\n", "  3 mock__fail: error (tool_error)\n"} {
		if !strings.Contains(text, line) {
			t.Errorf("the text the model reads lacks %q:\n%s", line, text)
		}
	}
	want := []binding.CallSummary{
		{Seq: 1, Tool: "mock__add", Outcome: binding.CallOK},
		{Seq: 2, Tool: "mock__class", Outcome: binding.CallDenied, Kind: failure.Denied},
		{Seq: 3, Tool: "mock__fail", Outcome: binding.CallError, Kind: failure.ToolError},
	}
	var report struct {
		ToolCalls []binding.CallSummary `json:"tool_calls"`
	}
	b, _ := json.Marshal(res.Meta["mcp-sandbox/report"])
	if err := json.Unmarshal(b, &report); err != nil || !cmp.Equal(report.ToolCalls, want) {
		t.Errorf("the report's tool_calls (%v) -want +got:\n%s", err, cmp.Diff(want, report.ToolCalls))
	}

	dir := t.TempDir()
	if out, errOut, code := runCLI(t, "", "export", "--config", cfg, "halfway", "-o", dir); code != 0 {
		t.Fatalf("export: exit %d\n%s\n%s", code, out, errOut)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "x_*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("export wrote %v, want one cassette", files)
	}
	c, err := cassette.Read(strings.NewReader(readFile(t, files[0])))
	if err != nil {
		t.Fatal(err)
	}
	report.ToolCalls = nil
	if err := json.Unmarshal(c.End.Result, &report); err != nil || !cmp.Equal(report.ToolCalls, want) {
		t.Errorf("the exported cassette's tool_calls (%v) -want +got:\n%s", err, cmp.Diff(want, report.ToolCalls))
	}
}
