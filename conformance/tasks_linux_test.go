package conformance

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// TestTasksClients (must show 1 of issue 41): the TypeScript SDK v2 client with its tasks
// package (@modelcontextprotocol/ext-tasks, pinned) over HTTP, on revision 2025-11-25 (core
// tasks: it finds run_code's taskSupport) and on 2026-07-28 (the io.modelcontextprotocol/tasks
// extension), calls run_code as a task: a 20 s program's task comes back at once, polls
// working and completes with its value and output; another program's task, cancelled while it
// runs, ends cancelled and leaves no process behind. The two revisions share one server and
// run at once.
func TestTasksClients(t *testing.T) {
	p := ecoNeedPeers(t)
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
data_dir: %q
profiles:
  default: {backend: local, isolation: process, allow_same_uid: true, hard_limits: {wall_seconds: 60}}
tenants:
  eco:
    tokens: ["sha256:f25304f25690670ae008ff9c122fbcfb785ec4541a0cad4c6d5591f1cb6de5e6"]
    agents:
      default: {code_execution: {profile: default}}
`, filepath.Join(t.TempDir(), "data")))
	url := ecoStartHTTP(t, cfg) + "/mcp"
	for _, protocol := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(protocol, func(t *testing.T) {
			t.Parallel()
			tasksClient(t, p, url, protocol)
		})
	}
}

// tasksClient runs clients/tasks-client.mjs on revision protocol against url and checks what
// it saw.
func tasksClient(t *testing.T, p ecoPeers, url, protocol string) {
	tag := fmt.Sprintf("%d", time.Now().UnixNano())
	cancelled := fmt.Sprintf("import subprocess, time\nsubprocess.Popen(['sleep', '1000'], env={'I41_TASK': %q})\ntime.sleep(60)", tag)
	out, err := ecoRun(t, 2*time.Minute, p.dir, p.env(), p.node, "clients/tasks-client.mjs", "--protocol", protocol, "--url", url, "--token", ecoToken,
		"--long", "import time\nprint('started')\ntime.sleep(20)\n6 * 7", "--cancel", cancelled)
	if err != nil {
		t.Fatalf("tasks-client: %v", err)
	}
	var r struct {
		Protocol      string   `json:"protocol"`
		TaskSupport   string   `json:"task_support"`
		Generation    string   `json:"generation"`
		LongKind      string   `json:"long_kind"`
		KilledKind    string   `json:"killed_kind"`
		StartedMs     int      `json:"started_ms"`
		Statuses      []string `json:"statuses"`
		Outcome       string   `json:"outcome"`
		Structured    json.RawMessage
		KilledOutcome string `json:"killed_outcome"`
	}
	t.Logf("tasks-client: %s", out)
	ecoDecode(t, out, &r)
	var value struct {
		Value  int    `json:"value"`
		Stdout string `json:"stdout"`
	}
	_ = json.Unmarshal(r.Structured, &value)
	if r.Protocol != protocol || r.LongKind != "task" || r.KilledKind != "task" {
		t.Errorf("the client did not run run_code as a task on %s: %s", protocol, out)
	}
	if protocol == "2025-11-25" && r.TaskSupport != "optional" {
		t.Errorf("run_code's taskSupport on %s: %q", protocol, r.TaskSupport)
	}
	if r.StartedMs > 5000 {
		t.Errorf("the task came back after %d ms, not at once", r.StartedMs)
	}
	if !slices.Contains(r.Statuses, "working") || r.Outcome != "completed" || value.Value != 42 || value.Stdout != "started\n" {
		t.Errorf("the 20 s task: statuses %v, outcome %s, %s", r.Statuses, r.Outcome, r.Structured)
	}
	if r.KilledOutcome != "cancelled" {
		t.Errorf("the cancelled task ended %q", r.KilledOutcome)
	}
	if left := testkit.Tagged("I41_TASK", tag); len(left) > 0 {
		t.Errorf("processes of the cancelled task are left: %v", left)
	}
}
