package conformance

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// TestTasksClients (must show 1 of issue 41): the TypeScript SDK v2 client with its tasks
// package (@modelcontextprotocol/ext-tasks, pinned) over HTTP, on revision 2025-11-25 (core
// tasks: it finds run_code's taskSupport) and on 2026-07-28 (the io.modelcontextprotocol/tasks
// extension), calls run_code as a task: a 20 s program's task comes back at once, polls
// working and completes with its value and output; another program's task, cancelled while it
// runs, ends cancelled and leaves no process behind. On 2026-07-28 (must show 3), a task whose
// program calls a tool needing approval goes input_required with the question as its input
// request; the client's person accepts it through the task (tasks/update) and the task
// completes with the call run once; in another such task the operator route answers instead.
// The two revisions share one server and run at once.
func TestTasksClients(t *testing.T) {
	p := ecoNeedPeers(t)
	dir := t.TempDir()
	counter := filepath.Join(dir, "counter.json")
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
data_dir: %q
approvals: {operator_tokens: [%q]}
profiles:
  default: {backend: local, isolation: process, allow_same_uid: true, hard_limits: {wall_seconds: 60}}
upstreams:
  support: {command: [%q], env: {MOCK_COUNTER_FILE: %q}}
tenants:
  eco:
    tokens: ["sha256:f25304f25690670ae008ff9c122fbcfb785ec4541a0cad4c6d5591f1cb6de5e6"]
    upstreams: [support]
    policy: {approval_required: ["support__add"]}
    agents:
      default: {code_execution: {profile: default}}
`, filepath.Join(dir, "data"), configs.HashToken(tasksOperator), built.mock, counter))
	url := ecoStartHTTP(t, cfg) + "/mcp"
	for _, protocol := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(protocol, func(t *testing.T) {
			t.Parallel()
			tasksClient(t, p, url, protocol, counter)
		})
	}
}

// askedTask is how tasks-client.mjs saw a task whose program's call needed approval: its
// outcome, the program's value, and (answered on the operator route) the route's HTTP status.
type askedTask struct {
	Kind       string `json:"kind"`
	Outcome    string `json:"outcome"`
	Structured struct {
		Value addOutcome `json:"value"`
	} `json:"structured"`
	OperatorStatus int `json:"operator_status"`
}

// tasksOperator is TestTasksClients' operator token.
const tasksOperator = "tasks-operator"

// tasksClient runs clients/tasks-client.mjs on revision protocol against url and checks what
// it saw; on 2026-07-28 with the questions through the task too, the upstream's calls counted
// in counter.
func tasksClient(t *testing.T, p ecoPeers, url, protocol, counter string) {
	tag := fmt.Sprintf("%d", time.Now().UnixNano())
	cancelled := fmt.Sprintf("import subprocess, time\nsubprocess.Popen(['sleep', '1000'], env={'I41_TASK': %q})\ntime.sleep(60)", tag)
	args := []string{"clients/tasks-client.mjs", "--protocol", protocol, "--url", url, "--token", ecoToken,
		"--long", "import time\nprint('started')\ntime.sleep(20)\n6 * 7", "--cancel", cancelled}
	modern := protocol == "2026-07-28"
	if modern {
		args = append(args, "--ask", callAdd, "--ask-operator", callAdd, "--operator-token", tasksOperator)
	}
	out, err := ecoRun(t, 2*time.Minute, p.dir, p.env(), p.node, args...)
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
		Asked         []struct {
			Kind     string `json:"kind"`
			Delivery string `json:"delivery"`
			InputID  string `json:"input_id"`
			Message  string `json:"message"`
		} `json:"asked"`
		Ask        *askedTask `json:"ask"`
		ByOperator *askedTask `json:"by_operator"`
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
	if !modern {
		return
	}
	if len(r.Asked) != 2 {
		t.Fatalf("the person was asked %d questions, want one per task: %+v", len(r.Asked), r.Asked)
	}
	for _, q := range r.Asked {
		if q.Kind != "elicitation" || q.Delivery != "task-update" || !strings.HasPrefix(q.InputID, "q_") ||
			!strings.Contains(q.Message, "support__add") || !strings.Contains(q.Message, "a = 2\n  b = 3") {
			t.Errorf("a question through the task: %+v", q)
		}
	}
	for what, run := range map[string]*askedTask{"accepted through the task": r.Ask, "approved on the operator route": r.ByOperator} {
		if run == nil || run.Kind != "task" || run.Outcome != "completed" || run.Structured.Value.Value["sum"] != 5 || run.Structured.Value.Kind != "" {
			t.Errorf("%s: %+v, want the task completed with the sum", what, run)
		}
	}
	if r.ByOperator != nil && r.ByOperator.OperatorStatus != http.StatusOK {
		t.Errorf("the operator's approval: HTTP %d", r.ByOperator.OperatorStatus)
	}
	if n := counts(t, counter)["add"]; n != 2 {
		t.Errorf("the upstream's add ran %d times, want once per task", n)
	}
}
