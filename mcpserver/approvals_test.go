package mcpserver

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/approval"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/budget/sqlite"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// person answers elicitation/create as a go-sdk client's handler: with action, or (action "")
// not at all until the request is withdrawn. It keeps what it was asked.
type person struct {
	mu       sync.Mutex
	action   string
	asked    []string
	answered atomic.Int32
}

func (p *person) set(action string) {
	p.mu.Lock()
	p.action = action
	p.mu.Unlock()
}

func (p *person) handler(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	p.mu.Lock()
	action := p.action
	p.asked = append(p.asked, req.Params.Message)
	p.mu.Unlock()
	if action == "" {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	p.answered.Add(1)
	return &mcp.ElicitResult{Action: action, Meta: mcp.Meta{MetaAnsweredBy: "ann@example.com"}}, nil
}

func (p *person) questions() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.asked...)
}

// approvalUpstream is the upstream fixture plus "wipe", annotated destructive, counting its
// real calls.
func approvalUpstream(t *testing.T) (*upstreamFixture, *atomic.Int32) {
	f := newUpstreamFixture(t)
	var wiped atomic.Int32
	mcp.AddTool(f.srv, &mcp.Tool{Name: "wipe", Description: "Wipes.", Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true)}},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			wiped.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "wiped " + in.S}}}, nil, nil
		})
	return f, &wiped
}

// TestApprovalsReachThePerson: a direct call and a program's call of a tool that needs
// approval are put to the person by elicitation/create; the answer decides, the ledger records
// who gave it, and the result counts it. Exposed tools needing approval are marked destructive.
func TestApprovalsReachThePerson(t *testing.T) {
	f, wiped := approvalUpstream(t)
	dir := t.TempDir()
	led, err := sqlite.Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	u := f.upstreams(true)
	u.ApprovalRequired = []string{"up__echo"}
	// Long enough for a question to reach the person on a loaded machine (the race detector
	// beside a CPU hog kept the first past 300 ms in CI), short for the one left unanswered.
	u.ApprovalTimeout = gate.Scaled(time.Second)
	var inProgram string
	sb := fakeSandbox{run: func(ctx context.Context, ex engine.Execution) *engine.Outcome {
		r := ex.Tools.CallTool(ctx, "up__wipe", json.RawMessage(`{"s":"p"}`))
		inProgram = string(r.Kind) + string(r.Value)
		return ok(`null`)(ctx, ex)
	}}
	p := &person{}
	cs := connectAt(t, Agent{Tenant: "t", Name: "a", Upstreams: u, CodeExecution: &CodeExec{Sandbox: sb, Terms: testTerms}},
		&Options{Ledger: led, Logger: discard()}, &mcp.ClientOptions{ElicitationHandler: p.handler}, revisionElicit)

	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		want := tl.Name == "up__wipe" || tl.Name == "up__echo"
		got := tl.Annotations != nil && tl.Annotations.DestructiveHint != nil && *tl.Annotations.DestructiveHint
		if strings.HasPrefix(tl.Name, "up__") && got != want {
			t.Errorf("%s destructiveHint %v, want %v", tl.Name, got, want)
		}
	}

	p.set("accept")
	if res := call(t, cs, "up__wipe", map[string]any{"s": "a"}); res.IsError || testkit.Text(res) != "wiped a" {
		t.Errorf("accepted: %v %s", res.IsError, testkit.Text(res))
	}
	p.set("decline")
	if res := call(t, cs, "up__wipe", map[string]any{"s": "b"}); !res.IsError || !strings.Contains(testkit.Text(res), "declined") {
		t.Errorf("declined: %v %s", res.IsError, testkit.Text(res))
	}
	p.set("")
	if res := call(t, cs, "up__echo", map[string]any{"s": "c"}); !res.IsError || !strings.Contains(testkit.Text(res), "approval_required_in_program") {
		t.Errorf("unanswered: %v %s", res.IsError, testkit.Text(res))
	}
	p.set("accept")
	res := call(t, cs, ToolRunCode, map[string]any{"code": "..."})
	if inProgram != `"wiped p"` {
		t.Errorf("the program's call answered %s", inProgram)
	}
	var r struct {
		Approvals approval.Counts `json:"approvals"`
	}
	b, _ := json.Marshal(res.Meta[MetaReport])
	if err := json.Unmarshal(b, &r); err != nil || r.Approvals != (approval.Counts{Asked: 1, Accepted: 1}) {
		t.Errorf("result approvals %s", b)
	}
	if !strings.Contains(testkit.Text(res), "approvals: 1 asked (1 accepted") {
		t.Errorf("text rendering lacks the approvals: %s", testkit.Text(res))
	}
	if n := wiped.Load(); n != 2 {
		t.Errorf("wipe ran %d times, want 2 (the two accepted calls)", n)
	}
	qs := p.questions()
	if len(qs) != 4 || !strings.Contains(qs[0], "up__wipe") || !strings.Contains(qs[0], `s = "a"`) ||
		!strings.Contains(qs[2], "approval_required") || !strings.Contains(qs[3], "A program") {
		t.Errorf("questions: %q", qs)
	}

	// Every decision is in the ledger, with who answered when the host said.
	var statuses []string
	for _, a := range ledgerApprovals(t, dir, led) {
		statuses = append(statuses, string(a.Status)+":"+a.AnsweredBy)
	}
	if got := strings.Join(statuses, ","); got != "accepted:ann@example.com,declined:ann@example.com,timed_out:,accepted:ann@example.com" {
		t.Errorf("ledger approvals %s", got)
	}
}

// ledgerApprovals returns the approvals of the one Run the ledger in dir holds.
func ledgerApprovals(t *testing.T, dir string, led budget.Ledger) []budget.ApprovalRecord {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, sqlite.LedgerFile)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var run budget.RunRef
	if err := db.QueryRow(`SELECT tenant, run_id FROM approvals LIMIT 1`).Scan(&run.Tenant, &run.ID); err != nil {
		t.Fatal(err)
	}
	recs, err := led.Approvals(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// revisionElicit is the latest MCP revision in which a server asks with elicitation/create.
const revisionElicit = "2025-11-25"

// TestApprovalsWithoutElicitation: a client that did not declare elicitation, of revision
// 2025-11-25 or 2026-07-28, over a session or sessionless, gets a refusal that says why and
// names no tool it cannot call; nobody is asked and the tool is not called. (A client of
// 2026-07-28 that declares it is asked through input requests: mrtr_test.go.)
func TestApprovalsWithoutElicitation(t *testing.T) {
	f, wiped := approvalUpstream(t)
	u := f.upstreams(true)
	u.ApprovalTimeout = time.Minute
	a := Agent{Tenant: "t", Name: "a", Upstreams: u}
	check := func(name string, res *mcp.CallToolResult, why string) {
		t.Helper()
		msg := testkit.Text(res)
		if !res.IsError || !strings.Contains(msg, "needs a person's approval") || !strings.Contains(msg, why) ||
			strings.Contains(msg, "directly") || strings.Count(msg, "__") != 1 {
			t.Errorf("%s: %v %s", name, res.IsError, msg)
		}
	}
	cs := connectAt(t, a, nil, nil, revisionElicit)
	check("no elicitation", call(t, cs, "up__wipe", map[string]any{"s": "x"}), "did not declare the elicitation capability")

	cs = connectAt(t, a, nil, nil, revisionStateless)
	check("2026-07-28 session", call(t, cs, "up__wipe", map[string]any{"s": "x"}), "did not declare the elicitation capability")

	srv := httptest.NewServer(HTTPHandler(&HTTPOptions{Agents: []Agent{a}, Tokenless: func() string { return "t" }, Loopback: true,
		Server: &Options{Logger: discard(), Drain: drainAtCleanup(t)}, Logger: discard()}))
	t.Cleanup(srv.Close)
	cs2, err := connectHTTP(t, srv.URL+"/mcp", http.DefaultTransport, revisionStateless, nil)
	if err != nil {
		t.Fatal(err)
	}
	check("sessionless", call(t, cs2, "up__wipe", map[string]any{"s": "x"}), "did not declare the elicitation capability")
	if wiped.Load() != 0 {
		t.Errorf("wiped %d; want never", wiped.Load())
	}
}

// TestApprovalsOverHTTPSession: a 2025-11-25 client over streamable HTTP (a session, the
// question on the call's stream) is asked like one over stdio.
func TestApprovalsOverHTTPSession(t *testing.T) {
	f, wiped := approvalUpstream(t)
	a := Agent{Tenant: "t", Name: "a", Upstreams: f.upstreams(true)}
	srv := httptest.NewServer(HTTPHandler(&HTTPOptions{Agents: []Agent{a}, Tokenless: func() string { return "t" }, Loopback: true,
		Server: &Options{Logger: discard(), Drain: drainAtCleanup(t)}, Logger: discard()}))
	t.Cleanup(srv.Close)
	p := &person{action: "accept"}
	cs, err := connectHTTP(t, srv.URL+"/mcp", http.DefaultTransport, revisionElicit, &mcp.ClientOptions{ElicitationHandler: p.handler})
	if err != nil {
		t.Fatal(err)
	}
	if res := call(t, cs, "up__wipe", map[string]any{"s": "h"}); res.IsError || testkit.Text(res) != "wiped h" {
		t.Errorf("accepted over HTTP: %v %s", res.IsError, testkit.Text(res))
	}
	if len(p.questions()) != 1 || wiped.Load() != 1 {
		t.Errorf("asked %d, wiped %d; want 1 and 1", len(p.questions()), wiped.Load())
	}
}

// TestApprovalsOneAtATime: 300 concurrent calls of one program that need approval reach the
// host's elicitation handler one at a time, and once the person has declined a few the rest
// are refused without asking.
func TestApprovalsOneAtATime(t *testing.T) {
	f, wiped := approvalUpstream(t)
	u := f.upstreams(true)
	u.ApprovalTimeout = time.Minute
	var kinds sync.Map
	sb := fakeSandbox{run: func(ctx context.Context, ex engine.Execution) *engine.Outcome {
		var wg sync.WaitGroup
		for i := range 300 {
			wg.Go(func() { kinds.Store(i, string(ex.Tools.CallTool(ctx, "up__wipe", json.RawMessage(`{"s":"p"}`)).Kind)) })
		}
		wg.Wait()
		return ok(`null`)(ctx, ex)
	}}
	var open, peak, asked atomic.Int32
	handler := func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked.Add(1)
		n := open.Add(1)
		defer open.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(5 * time.Millisecond) // long enough for a second question to overlap, were one sent
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	cs := connectAt(t, Agent{Tenant: "t", Name: "a", Upstreams: u, CodeExecution: &CodeExec{Sandbox: sb, Terms: testTerms}},
		&Options{Logger: discard()}, &mcp.ClientOptions{ElicitationHandler: handler}, revisionElicit)
	res := call(t, cs, ToolRunCode, map[string]any{"code": "..."})
	if p := peak.Load(); p != 1 {
		t.Errorf("%d questions were open at once, want at most 1", p)
	}
	if n := asked.Load(); n < 1 || n > 5 {
		t.Errorf("%d questions asked; the person declined, so only the first few are asked", n)
	}
	n := 0
	kinds.Range(func(_, k any) bool {
		n++
		if k != "denied" {
			t.Errorf("a call ended %q, want denied", k)
		}
		return true
	})
	if n != 300 || wiped.Load() != 0 {
		t.Errorf("%d calls ended, wipe ran %d times", n, wiped.Load())
	}
	b, _ := json.Marshal(res.Meta[MetaReport])
	if !strings.Contains(string(b), `"unasked":`) {
		t.Errorf("result approvals %s", b)
	}
}
