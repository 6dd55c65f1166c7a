package mcpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/budget/sqlite"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// TestApprovalsByInputRequests: a go-sdk client of 2026-07-28 (its default) that declares
// elicitation is asked through input_required and retries with the answer (go-sdk's own
// retry loop), in a session and sessionless over HTTP, for a direct call and a program's:
// accepted the tool runs once and the program gets its value; declined it never runs and the
// program sees denied.
func TestApprovalsByInputRequests(t *testing.T) {
	f, wiped := approvalUpstream(t)
	var inProgram []string
	sb := fakeSandbox{run: func(ctx context.Context, ex engine.Execution) *engine.Outcome {
		r := ex.Tools.CallTool(ctx, "up__wipe", json.RawMessage(`{"s":"p"}`))
		inProgram = append(inProgram, string(r.Kind)+string(r.Value))
		return ok(`null`)(ctx, ex)
	}}
	a := Agent{Tenant: "t", Name: "a", Upstreams: f.upstreams(true), CodeExecution: &CodeExec{Sandbox: sb, Terms: testTerms}}
	p := &person{}
	srv := httptest.NewServer(HTTPHandler(&HTTPOptions{Agents: []Agent{a}, Tokenless: func() string { return "t" }, Loopback: true,
		Server: &Options{Logger: discard(), Drain: drainAtCleanup(t)}, Logger: discard()}))
	t.Cleanup(srv.Close)
	overHTTP, err := connectHTTP(t, srv.URL+"/mcp", http.DefaultTransport, revisionStateless, &mcp.ClientOptions{ElicitationHandler: p.handler})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		cs   *mcp.ClientSession
	}{
		{"session", connectAt(t, a, &Options{Logger: discard()}, &mcp.ClientOptions{ElicitationHandler: p.handler}, "")},
		{"sessionless HTTP", overHTTP},
	} {
		t.Run(c.name, func(t *testing.T) {
			wiped.Store(0)
			inProgram = nil
			p.set("accept")
			if res := call(t, c.cs, "up__wipe", map[string]any{"s": "a"}); res.IsError || testkit.Text(res) != "wiped a" {
				t.Errorf("accepted: %v %s", res.IsError, testkit.Text(res))
			}
			if res := call(t, c.cs, ToolRunCode, map[string]any{"code": "..."}); res.IsError || !strings.Contains(testkit.Text(res), "approvals: 1 asked (1 accepted") {
				t.Errorf("program, accepted: %v %s", res.IsError, testkit.Text(res))
			}
			if n := wiped.Load(); n != 2 {
				t.Errorf("accepted: wipe ran %d times, want 2 (one direct, one in the program)", n)
			}
			p.set("decline")
			if res := call(t, c.cs, "up__wipe", map[string]any{"s": "b"}); !res.IsError || !strings.Contains(testkit.Text(res), "(denied)") {
				t.Errorf("declined: %v %s", res.IsError, testkit.Text(res))
			}
			call(t, c.cs, ToolRunCode, map[string]any{"code": "..."})
			if n := wiped.Load(); n != 2 {
				t.Errorf("declined: wipe ran %d times in all, want still 2", n)
			}
			if got := strings.Join(inProgram, ","); got != `"wiped p",denied` {
				t.Errorf("the program's calls answered %s", got)
			}
		})
	}
	if qs := p.questions(); len(qs) != 8 || !strings.Contains(qs[0], "up__wipe") || !strings.Contains(qs[0], `s = "a"`) ||
		!strings.Contains(qs[1], "A program") {
		t.Errorf("questions: %q", qs)
	}
}

// firstRound makes a call with a client that retries nothing itself and returns its
// input_required result.
func firstRound(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (state, question string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	if !res.NeedsInput() || len(res.InputRequests) != 1 || res.RequestState == "" {
		t.Fatalf("%s: want input_required with one question and a state, got %s", name, testkit.Text(res))
	}
	for id, ir := range res.InputRequests {
		if e, ok := ir.(*mcp.ElicitParams); !ok || !strings.Contains(e.Message, name) {
			t.Fatalf("input request %T %+v", ir, ir)
		}
		question = id
	}
	return res.RequestState, question
}

// retry sends the retry of a call with a state and an answer to one question.
func retry(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, state, question, action string) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, RequestState: state,
		InputResponses: mcp.InputResponseMap{question: &mcp.ElicitResult{Action: action}}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestHostileRequestStates (must show 4): a retry whose state was tampered with, cut short,
// issued to another tenant, for other arguments, expired, already answered, or replayed after
// it was accepted is refused with its reason, and the tool is never called by it; the genuine
// state still works after every refusal, once.
func TestHostileRequestStates(t *testing.T) {
	f, wiped := approvalUpstream(t)
	keys := RandomStateKeys() // shared, as replicas share approvals.state_key
	manual := &mcp.ClientOptions{ElicitationHandler: (&person{}).handler, MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}}
	u := f.upstreams(true)
	tenant := connectAt(t, Agent{Tenant: "t", Name: "a", Upstreams: u}, &Options{Logger: discard(), StateKeys: keys}, manual, "")
	other := connectAt(t, Agent{Tenant: "u", Name: "a", Upstreams: u}, &Options{Logger: discard(), StateKeys: keys}, manual, "")
	args := map[string]any{"s": "x"}
	refused := func(what string, res *mcp.CallToolResult, why string) {
		t.Helper()
		if msg := testkit.Text(res); !res.IsError || res.NeedsInput() || !strings.Contains(msg, "was refused") || !strings.Contains(msg, why) {
			t.Errorf("%s: %v %s; want refused: %s", what, res.IsError, msg, why)
		}
		if n := wiped.Load(); n != 0 {
			t.Fatalf("%s: wipe ran %d times", what, n)
		}
	}

	state, q := firstRound(t, tenant, "up__wipe", args)
	flip := []byte(state)
	flip[len(flip)/2] ^= 1
	refused("tampered", retry(t, tenant, "up__wipe", args, string(flip), q, "accept"), "does not open")
	refused("truncated", retry(t, tenant, "up__wipe", args, state[:len(state)-4], q, "accept"), "does not open")
	refused("not base64", retry(t, tenant, "up__wipe", args, "!!"+state, q, "accept"), "does not open")
	refused("under another key", retry(t, connectAt(t, Agent{Tenant: "t", Name: "a", Upstreams: u}, &Options{Logger: discard()}, manual, ""),
		"up__wipe", args, state, q, "accept"), "does not open")
	otherState, otherQ := firstRound(t, other, "up__wipe", args)
	refused("another tenant's", retry(t, tenant, "up__wipe", args, otherState, otherQ, "accept"), "another tenant")
	refused("other arguments", retry(t, tenant, "up__wipe", map[string]any{"s": "y"}, state, q, "accept"), "another call")
	refused("no answer", retry(t, tenant, "up__wipe", args, state, "q_nothing", "accept"), "not accompanied by an answer")

	if res := retry(t, tenant, "up__wipe", args, state, q, "accept"); res.IsError || testkit.Text(res) != "wiped x" {
		t.Fatalf("the genuine state, accepted: %v %s", res.IsError, testkit.Text(res))
	}
	for i := range 2 {
		res := retry(t, tenant, "up__wipe", args, state, q, "accept")
		if msg := testkit.Text(res); !res.IsError || !strings.Contains(msg, "already answered") {
			t.Errorf("replay %d of an accepted state: %v %s", i+1, res.IsError, msg)
		}
	}
	if n := wiped.Load(); n != 1 {
		t.Fatalf("wipe ran %d times, want exactly 1", n)
	}
	wiped.Store(0)

	// Declined, then replayed as accepted: already answered, never called.
	state, q = firstRound(t, tenant, "up__wipe", args)
	if res := retry(t, tenant, "up__wipe", args, state, q, "decline"); !res.IsError || !strings.Contains(testkit.Text(res), "(denied)") {
		t.Errorf("declined: %s", testkit.Text(res))
	}
	refused("a declined state, accepted", retry(t, tenant, "up__wipe", args, state, q, "accept"), "already answered")
	// The other tenant's question ends unanswered: declined by its own retry.
	if res := retry(t, other, "up__wipe", args, otherState, otherQ, "decline"); !res.IsError {
		t.Errorf("the other tenant's decline: %s", testkit.Text(res))
	}

	// Expired: the question's wait ended before the retry came.
	short := f.upstreams(true)
	short.ApprovalTimeout = time.Second
	quick := connectAt(t, Agent{Tenant: "t", Name: "a", Upstreams: short}, &Options{Logger: discard(), StateKeys: keys}, manual, "")
	state, q = firstRound(t, quick, "up__wipe", args)
	time.Sleep(1500 * time.Millisecond)
	refused("expired", retry(t, quick, "up__wipe", args, state, q, "accept"), "expired")
	if wiped.Load() != 0 {
		t.Errorf("wipe ran")
	}
}

// TestInputRequestsSeveralQuestions: a program that asks twice is held across two round trips
// (each answer continues it, never restarts it): the first call accepted runs once, the
// second declined never runs, and the ledger records both with who answered.
func TestInputRequestsSeveralQuestions(t *testing.T) {
	f, wiped := approvalUpstream(t)
	dir := t.TempDir()
	led, err := sqlite.Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	var starts atomic.Int32
	var answers []string
	sb := fakeSandbox{run: func(ctx context.Context, ex engine.Execution) *engine.Outcome {
		starts.Add(1)
		for _, s := range []string{"one", "two"} {
			r := ex.Tools.CallTool(ctx, "up__wipe", json.RawMessage(`{"s":"`+s+`"}`))
			answers = append(answers, string(r.Kind)+string(r.Value))
		}
		return ok(`null`)(ctx, ex)
	}}
	var asked atomic.Int32
	answer := func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		action := "accept"
		if asked.Add(1) > 1 {
			action = "decline"
		}
		return &mcp.ElicitResult{Action: action, Meta: mcp.Meta{MetaAnsweredBy: "ann@example.com"}}, nil
	}
	cs := connectAt(t, Agent{Tenant: "t", Name: "a", Upstreams: f.upstreams(false), CodeExecution: &CodeExec{Sandbox: sb, Terms: testTerms}},
		&Options{Ledger: led, Logger: discard()}, &mcp.ClientOptions{ElicitationHandler: answer}, "")
	res := call(t, cs, ToolRunCode, map[string]any{"code": "..."})
	if !strings.Contains(testkit.Text(res), "approvals: 2 asked (1 accepted, 1 declined") {
		t.Errorf("result: %s", testkit.Text(res))
	}
	if got := strings.Join(answers, ","); got != `"wiped one",denied` || starts.Load() != 1 || wiped.Load() != 1 {
		t.Errorf("answers %s, program started %d times, wipe ran %d; want one start and one wipe", got, starts.Load(), wiped.Load())
	}
	var statuses []string
	for _, a := range ledgerApprovals(t, dir, led) {
		statuses = append(statuses, string(a.Status)+":"+a.AnsweredBy)
	}
	if got := strings.Join(statuses, ","); got != "accepted:ann@example.com,declined:ann@example.com" {
		t.Errorf("ledger approvals %s", got)
	}
}
