package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/budget/sqlite"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

type wireTaskAnswer struct {
	Task wireOfTask `json:"task"`
}

// TestRunCodeAsTask (must show 1, 4 and 6 of issue 41 in the fast layer, with a fake sandbox):
// a 2025-11-25 client over HTTP sees the tasks capability and run_code's taskSupport; a
// task-augmented run_code answers at once with a working task; tasks/get polls it, tasks/result
// waits for its result (value and the related task); tasks/cancel of another ends it cancelled
// with its program's context cancelled; another tenant asking for the task id gets the answer
// for an unknown task; a plain call is answered as before.
func TestRunCodeAsTask(t *testing.T) {
	release, running := make(chan struct{}), make(chan struct{}, 2)
	var cancelledSeen atomic.Bool
	sb := fakeSandbox{run: func(ctx context.Context, ex engine.Execution) *engine.Outcome {
		switch ex.Program {
		case "slow":
			running <- struct{}{}
			select {
			case <-release:
				return ok(`42`)(ctx, ex)
			case <-ctx.Done():
				cancelledSeen.Store(true)
				r := engine.Refuse(ex.Terms, failure.Cancelled, "cancelled")
				r.Failure.Executed, r.Cancelled = true, true
				return r
			}
		}
		return ok(`7`)(ctx, ex)
	}}
	led, err := sqlite.Open(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	var agents []Agent
	for _, tenant := range []string{"alpha", "beta"} {
		agents = append(agents, Agent{Tenant: tenant, Name: "a", CodeExecution: &CodeExec{Sandbox: sb, Terms: testTerms}})
	}
	srv := httptest.NewServer(HTTPHandler(&HTTPOptions{Agents: agents, Loopback: true,
		Authenticate: func(tok string) (string, bool) {
			return strings.TrimPrefix(tok, "tok-"), strings.HasPrefix(tok, "tok-")
		},
		Server: &Options{Logger: discard(), Drain: drainAtCleanup(t), Ledger: led}, Logger: discard()}))
	t.Cleanup(srv.Close)

	alpha, init := testkit.OpenRPC(t, srv.URL+"/mcp", "tok-alpha")
	if caps, _ := init["capabilities"].(map[string]any); caps["tasks"] == nil || caps["tools"] == nil {
		t.Errorf("initialize's capabilities lack tasks: %v", init["capabilities"])
	}
	var list struct {
		Tools []map[string]any `json:"tools"`
	}
	if e := alpha.Call("tools/list", map[string]any{}, &list); e != nil {
		t.Fatal(e)
	}
	for _, tool := range list.Tools {
		ex, _ := tool["execution"].(map[string]any)
		if want := tool["name"] == ToolRunCode; (ex != nil && ex["taskSupport"] == "optional") != want {
			t.Errorf("tool %v has execution %v", tool["name"], tool["execution"])
		}
	}

	start := func(code string) wireOfTask {
		t.Helper()
		var a wireTaskAnswer
		if e := alpha.Call("tools/call", map[string]any{"name": ToolRunCode, "arguments": map[string]any{"code": code},
			"task": map[string]any{"ttl": 60000}}, &a); e != nil {
			t.Fatalf("task-augmented tools/call: %+v", e)
		}
		if a.Task.TaskID == "" || a.Task.Status != "working" || a.Task.TTL != 60000 || a.Task.PollInterval <= 0 {
			t.Fatalf("created task %+v", a.Task)
		}
		return a.Task
	}
	get := func(s *testkit.RPC, id string) (wireOfTask, *testkit.RPCError) {
		var got wireOfTask
		e := s.Call("tasks/get", map[string]any{"taskId": id}, &got)
		return got, e
	}

	done, killed := start("slow"), start("slow")
	if got, e := get(alpha, done.TaskID); e != nil || got.Status != "working" {
		t.Errorf("tasks/get while it runs: %+v %+v", got, e)
	}
	beta, _ := testkit.OpenRPC(t, srv.URL+"/mcp", "tok-beta")
	_, e := get(beta, done.TaskID)
	_, unknown := get(beta, "t_00000000000000000000000000000000")
	if e == nil || unknown == nil || e.Code != unknown.Code || strings.ReplaceAll(e.Message, done.TaskID, "ID") !=
		strings.ReplaceAll(unknown.Message, "t_00000000000000000000000000000000", "ID") {
		t.Errorf("tenant beta asking for alpha's task got %+v; for an unknown one %+v", e, unknown)
	}

	// Both programs are running (a cancel before that ends the task as well, but kills nothing).
	for range 2 {
		select {
		case <-running:
		case <-time.After(gate.Scaled(10 * time.Second)):
			t.Fatal("the tasks' programs never started")
		}
	}
	var cancelled wireOfTask
	if e := alpha.Call("tasks/cancel", map[string]any{"taskId": killed.TaskID}, &cancelled); e != nil || cancelled.Status != "cancelled" {
		t.Errorf("tasks/cancel: %+v %+v", cancelled, e)
	}
	if !cancelledSeen.Load() {
		t.Error("the cancelled task's program was not cancelled")
	}
	var cres struct {
		IsError           bool           `json:"isError"`
		StructuredContent map[string]any `json:"structuredContent"`
	}
	if e := alpha.Call("tasks/result", map[string]any{"taskId": killed.TaskID}, &cres); e != nil || cres.StructuredContent["cancelled"] != true {
		t.Errorf("a cancelled task's result: %+v %+v", cres, e)
	}

	close(release)
	var res struct {
		IsError           bool           `json:"isError"`
		StructuredContent map[string]any `json:"structuredContent"`
		Meta              map[string]any `json:"_meta"`
	}
	if e := alpha.Call("tasks/result", map[string]any{"taskId": done.TaskID}, &res); e != nil || res.IsError ||
		fmt.Sprint(res.StructuredContent["value"]) != "42" || res.Meta[metaRelatedTask] == nil {
		t.Errorf("tasks/result: %+v %+v", res, e)
	}
	if got, e := get(alpha, done.TaskID); e != nil || got.Status != "completed" {
		t.Errorf("tasks/get once done: %+v %+v", got, e)
	}
	var tl struct {
		Tasks []wireOfTask `json:"tasks"`
	}
	if e := alpha.Call("tasks/list", map[string]any{}, &tl); e != nil || len(tl.Tasks) != 2 {
		t.Errorf("tasks/list: %+v %+v", tl, e)
	}
	if e := beta.Call("tasks/list", map[string]any{}, &tl); e != nil || len(tl.Tasks) != 0 {
		t.Errorf("beta's tasks/list: %+v %+v", tl, e)
	}

	// A client of 2026-07-28 gets the extension's shapes: a result of type task, tasks/get's
	// detailed task with the result inline once it completed. Its program runs in the task's
	// Run, though the request's throwaway session (whose Run it is) may end before it starts.
	modern := testkit.ModernRPC(t, srv.URL+"/mcp", "tok-alpha")
	for i := range 5 {
		var created map[string]any
		if e := modern.Call("tools/call", map[string]any{"name": ToolRunCode, "arguments": map[string]any{"code": "x"}}, &created); e != nil ||
			created["resultType"] != "task" || created["taskId"] == nil || created["status"] != "working" {
			t.Fatalf("2026-07-28 run_code: %v %+v", created, e)
		}
		var detailed map[string]any
		for deadline := time.Now().Add(gate.Scaled(10 * time.Second)); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if e := modern.Call("tasks/get", map[string]any{"taskId": created["taskId"]}, &detailed); e != nil || detailed["resultType"] != "complete" {
				t.Fatalf("2026-07-28 tasks/get: %v %+v", detailed, e)
			}
			if detailed["status"] != "working" {
				break
			}
		}
		result, _ := detailed["result"].(map[string]any)
		if sc, _ := result["structuredContent"].(map[string]any); detailed["status"] != "completed" || fmt.Sprint(sc["value"]) != "7" || result["resultType"] != "complete" {
			t.Errorf("2026-07-28 tasks/get of the completed task: %v", detailed)
		}
		task, err := led.Task(t.Context(), "alpha", created["taskId"].(string))
		if err != nil {
			t.Fatal(err)
		}
		if rec, err := led.Execution(t.Context(), task.ExecutionID); err != nil || rec.Run.ID != task.Run {
			t.Fatalf("task %d of 2026-07-28 (Run %s) ran its program in Run %s (%v)", i, task.Run, rec.Run.ID, err)
		}
	}

	// A call without a task is answered as before.
	var plain struct {
		StructuredContent map[string]any `json:"structuredContent"`
	}
	if e := alpha.Call("tools/call", map[string]any{"name": ToolRunCode, "arguments": map[string]any{"code": "x"}}, &plain); e != nil ||
		fmt.Sprint(plain.StructuredContent["value"]) != "7" {
		t.Errorf("a plain call: %+v %+v", plain, e)
	}
}

// wipingTasks are the pieces of a task whose program calls up__wipe, which needs a person's
// approval: the upstream and how many times wipe ran, a sandbox whose program's value is
// "wiped" or the kind of the call's failure, and a ledger in dir.
func wipingTasks(t *testing.T, dir string) (*upstreamFixture, *atomic.Int32, fakeSandbox, *sqlite.Ledger) {
	f, wiped := approvalUpstream(t)
	sb := fakeSandbox{run: func(ctx context.Context, ex engine.Execution) *engine.Outcome {
		if r := ex.Tools.CallTool(ctx, "up__wipe", json.RawMessage(`{"s":"p"}`)); r.Kind != "" {
			return ok(`"`+string(r.Kind)+`"`)(ctx, ex)
		}
		return ok(`"wiped"`)(ctx, ex)
	}}
	led := openLedger(t, dir)
	t.Cleanup(func() { led.Close() })
	return f, wiped, sb, led
}

// TestTaskInputRequired (must show 3 of issue 41, revision 2025-11-25): a task whose program
// calls a tool needing approval goes input_required while the question is put by elicitation
// on the client's session; accepting it there completes the task with the call run once; in a
// second task the operator route answers instead, while the client's question stays open.
func TestTaskInputRequired(t *testing.T) {
	f, wiped, sb, led := wipingTasks(t, t.TempDir())
	a := Agent{Tenant: "t", Name: "a", Upstreams: f.upstreams(true), CodeExecution: &CodeExec{Sandbox: sb, Terms: testTerms}}
	srv := httptest.NewServer(HTTPHandler(&HTTPOptions{Agents: []Agent{a}, Tokenless: func() string { return "t" }, Loopback: true,
		Operator: func(tok string) bool { return tok == "operator-token" },
		Server:   &Options{Logger: discard(), Drain: drainAtCleanup(t), Ledger: led, PausePoll: 50 * time.Millisecond}, Logger: discard()}))
	t.Cleanup(srv.Close)
	t.Cleanup(http.DefaultClient.CloseIdleConnections)

	asked, answer := make(chan struct{}, 4), make(chan string, 4)
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, &mcp.ClientOptions{
		ElicitationHandler: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked <- struct{}{}
			select {
			case act := <-answer:
				return &mcp.ElicitResult{Action: act}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}})
	for _, m := range []string{"tasks/get", "tasks/result"} {
		if err := mcp.AddSendingCustomMethod[*taskParams, *taskResult](client, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := mcp.AddSendingCustomMethod[*taskListParams, *taskListResult](client, "tasks/list"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(30*time.Second))
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })

	// start runs the program as a task (go-sdk's client sends the task in _meta, where the
	// HTTP face puts a task field) and returns the task's id, the newest listed.
	start := func() string {
		t.Helper()
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolRunCode, Arguments: map[string]any{"code": "..."},
			Meta: mcp.Meta{metaTask: map[string]any{}}}); err != nil {
			t.Fatal(err)
		}
		l, err := mcp.CallCustomMethod[*taskListParams, *taskListResult](ctx, cs, "tasks/list", &taskListParams{})
		if err != nil || len(l.Tasks) == 0 {
			t.Fatalf("tasks/list: %+v %v", l, err)
		}
		return l.Tasks[0].TaskID
	}
	status := func(id string) string {
		t.Helper()
		got, err := mcp.CallCustomMethod[*taskParams, *taskResult](ctx, cs, "tasks/get", &taskParams{TaskID: id})
		if err != nil {
			t.Fatal(err)
		}
		return got.Status
	}
	waitAsked := func() {
		t.Helper()
		select {
		case <-asked:
		case <-ctx.Done():
			t.Fatal("the client was never asked")
		}
	}
	awaitStatus := func(id, want string) {
		t.Helper()
		for status(id) != want {
			select {
			case <-ctx.Done():
				t.Fatalf("task %s never %s (is %s)", id, want, status(id))
			case <-time.After(10 * time.Millisecond):
			}
		}
	}

	// By the client's path.
	id := start()
	waitAsked()
	awaitStatus(id, "input_required")
	answer <- "accept"
	awaitStatus(id, "completed")
	if n := wiped.Load(); n != 1 {
		t.Errorf("accepted by the client: wipe ran %d times, want once", n)
	}

	// By the operator's route, the client's question left open.
	id = start()
	waitAsked()
	awaitStatus(id, "input_required")
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/approvals", nil)
	req.Header.Set("Authorization", "Bearer operator-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var pending []struct {
		ID string `json:"id"`
	}
	err = json.NewDecoder(resp.Body).Decode(&pending)
	resp.Body.Close()
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending approvals: %+v %v", pending, err)
	}
	req, _ = http.NewRequest(http.MethodPost, srv.URL+"/v1/approvals/"+pending[0].ID+"/approve", nil)
	req.Header.Set("Authorization", "Bearer operator-token")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the operator's approval: %s", resp.Status)
	}
	awaitStatus(id, "completed")
	if n := wiped.Load(); n != 2 {
		t.Errorf("approved by the operator: wipe ran %d times in all, want 2", n)
	}
}
