package mcpserver

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget/sqlite"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// TestTaskInputByUpdate (must show 3 of issue 41, revision 2026-07-28, in the fast layer): a
// task of the tasks extension whose program calls a tool needing approval goes input_required,
// tasks/get showing the question as its input request keyed by the approval id; tasks/update
// accepting it completes the task with the call run once; a declining answer denies the call,
// and the program sees the denial, though given on another replica on the ledger. With two
// tasks waiting at once each shows its own question only. An answer for an unknown request id, for another task's, one already answered, one
// that is no answer, and one from another tenant are refused with the reason, and change
// nothing.
func TestTaskInputByUpdate(t *testing.T) {
	dir := t.TempDir()
	f, wiped, sb, led := wipingTasks(t, dir)
	var agents []Agent
	for _, tenant := range []string{"alpha", "beta"} {
		agents = append(agents, Agent{Tenant: tenant, Name: "a", Upstreams: f.upstreams(true), CodeExecution: &CodeExec{Sandbox: sb, Terms: testTerms}})
	}
	// Two replicas on one ledger: the programs run on the first.
	serve := func(led *sqlite.Ledger) string {
		srv := httptest.NewServer(HTTPHandler(&HTTPOptions{Agents: agents, Loopback: true,
			Authenticate: func(tok string) (string, bool) {
				return strings.TrimPrefix(tok, "tok-"), strings.HasPrefix(tok, "tok-")
			},
			Server: &Options{Logger: discard(), Drain: drainAtCleanup(t), Ledger: led, PausePoll: 50 * time.Millisecond}, Logger: discard()}))
		t.Cleanup(srv.Close)
		return srv.URL + "/mcp"
	}
	led2 := openLedger(t, dir)
	t.Cleanup(func() { led2.Close() })
	url, replica := serve(led), serve(led2)
	alpha, beta, there := testkit.ModernRPC(t, url, "tok-alpha"), testkit.ModernRPC(t, url, "tok-beta"), testkit.ModernRPC(t, replica, "tok-alpha")

	type detailed struct {
		Status        string `json:"status"`
		StatusMessage string `json:"statusMessage"`
		InputRequests map[string]struct {
			Method string `json:"method"`
			Params struct {
				Mode            string         `json:"mode"`
				Message         string         `json:"message"`
				RequestedSchema map[string]any `json:"requestedSchema"`
			} `json:"params"`
		} `json:"inputRequests"`
		Result struct {
			StructuredContent struct {
				Value string `json:"value"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	get := func(s *testkit.RPC, id string) detailed {
		t.Helper()
		var d detailed
		if e := s.Call("tasks/get", map[string]any{"taskId": id}, &d); e != nil {
			t.Fatalf("tasks/get: %+v", e)
		}
		return d
	}
	await := func(s *testkit.RPC, id, status string) detailed {
		t.Helper()
		deadline := time.Now().Add(gate.Scaled(10 * time.Second))
		for {
			d := get(s, id)
			if d.Status == status {
				return d
			}
			if time.Now().After(deadline) {
				t.Fatalf("task %s never %s: %+v", id, status, d)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// asked starts a task and returns its id and the id of the question it waits on, as s
	// reads it.
	asked := func(s *testkit.RPC) (task, question string) {
		t.Helper()
		var created map[string]any
		if e := alpha.Call("tools/call", map[string]any{"name": ToolRunCode, "arguments": map[string]any{"code": "x"}}, &created); e != nil ||
			created["resultType"] != "task" {
			t.Fatalf("run_code as a task: %v %+v", created, e)
		}
		task = created["taskId"].(string)
		d := await(s, task, "input_required")
		if len(d.InputRequests) != 1 {
			t.Fatalf("input_required without one input request: %+v", d)
		}
		for id, r := range d.InputRequests {
			question = id
			if r.Method != "elicitation/create" || r.Params.Mode != "form" || !strings.Contains(r.Params.Message, "Approve one call of up__wipe?") ||
				!strings.Contains(r.Params.Message, "s = \"p\"") || r.Params.RequestedSchema["type"] != "object" {
				t.Errorf("the input request: %+v", r)
			}
			if !strings.Contains(d.StatusMessage, id) {
				t.Errorf("the status message %q does not name the approval %s (what the operator route decides)", d.StatusMessage, id)
			}
		}
		return task, question
	}
	update := func(s *testkit.RPC, task string, responses map[string]any) *testkit.RPCError {
		t.Helper()
		var done map[string]any
		e := s.Call("tasks/update", map[string]any{"taskId": task, "inputResponses": responses}, &done)
		if e == nil && done["resultType"] != "complete" {
			t.Errorf("tasks/update answered %v", done)
		}
		return e
	}
	refused := func(what string, e *testkit.RPCError, want string) {
		t.Helper()
		if e == nil || e.Code != -32602 || !strings.Contains(e.Message, want) {
			t.Errorf("%s: %+v, want -32602 saying %q", what, e, want)
		}
	}

	task, q := asked(alpha)
	// Both wait at once, each showing its own question only, on either replica.
	other, oq := asked(there)
	refused("an unknown request id", update(alpha, task, map[string]any{"q_unknown": map[string]any{"action": "accept"}}), `has no input request "q_unknown"`)
	refused("another task's request id", update(alpha, task, map[string]any{oq: map[string]any{"action": "accept"}}), `has no input request "`+oq+`"`)
	refused("no answer", update(alpha, task, map[string]any{q: map[string]any{"action": "maybe"}}), "accept, decline or cancel")
	refused("another tenant", update(beta, task, map[string]any{q: map[string]any{"action": "accept"}}), "task not found")
	if st := get(alpha, task).Status; st != "input_required" || wiped.Load() != 0 {
		t.Fatalf("refused answers changed the task (%s) or ran the call (%d)", st, wiped.Load())
	}
	if e := update(alpha, task, map[string]any{q: map[string]any{"action": "accept"}}); e != nil {
		t.Fatalf("tasks/update accepting: %+v", e)
	}
	if d := await(alpha, task, "completed"); d.Result.StructuredContent.Value != "wiped" || wiped.Load() != 1 {
		t.Errorf("accepted through the task: %+v, wipe ran %d times; want wiped, once", d, wiped.Load())
	}
	refused("a stale request id", update(alpha, task, map[string]any{q: map[string]any{"action": "accept"}}), "answered already (accepted")

	// Declined on the other replica: the program, running on the first, hears it.
	if e := update(there, other, map[string]any{oq: map[string]any{"action": "decline"}}); e != nil {
		t.Fatalf("tasks/update declining: %+v", e)
	}
	if d := await(there, other, "completed"); d.Result.StructuredContent.Value != "denied" || wiped.Load() != 1 {
		t.Errorf("declined through the task: %+v, wipe ran %d times in all; want denied, and still once", d, wiped.Load())
	}
}
