package mcpserver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
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
	"github.com/mcp-sandbox/mcp-sandbox/execution"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// pauseFixture is an upstream whose count tool counts its calls beside wipe (which needs
// approval), and a program that counts "before", wipes, and counts "after"; diverge makes its
// second and later starts count something else first, as a program reading the clock would.
type pauseFixture struct {
	f              *upstreamFixture
	counted, wiped *atomic.Int32
	starts         atomic.Int32
	diverge        bool

	mu      sync.Mutex
	answers []string
}

func newPauseFixture(t *testing.T) *pauseFixture {
	f, wiped := approvalUpstream(t)
	px := &pauseFixture{f: f, wiped: wiped, counted: &atomic.Int32{}}
	mcp.AddTool(f.srv, &mcp.Tool{Name: "count", Description: "Counts."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			n := px.counted.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.S + "#" + string(rune('0'+n))}}}, nil, nil
		})
	return px
}

func (px *pauseFixture) agent() Agent {
	sb := fakeSandbox{run: func(ctx context.Context, ex engine.Execution) *engine.Outcome {
		first := "before"
		if px.starts.Add(1) > 1 && px.diverge {
			first = "clock"
		}
		var got []string
		for _, c := range []struct{ tool, s string }{{"up__count", first}, {"up__wipe", "x"}, {"up__count", "after"}} {
			r := ex.Tools.CallTool(ctx, c.tool, json.RawMessage(`{"s":"`+c.s+`"}`))
			got = append(got, string(r.Kind)+string(r.Value))
		}
		px.mu.Lock()
		px.answers = got
		px.mu.Unlock()
		return ok(`null`)(ctx, ex)
	}}
	u := px.f.upstreams(false)
	u.ApprovalTimeout = time.Hour // the question outlives every wait of the test
	return Agent{Tenant: "t", Name: "a", Upstreams: u, CodeExecution: &CodeExec{Sandbox: sb, Terms: testTerms}}
}

func (px *pauseFixture) programSaw() string {
	px.mu.Lock()
	defer px.mu.Unlock()
	return strings.Join(px.answers, ",")
}

// runParams is run_code in the named Run r, which a retry reaching another process names too.
func runParams(state, question, action string) *mcp.CallToolParams {
	p := &mcp.CallToolParams{Name: ToolRunCode, Arguments: map[string]any{"code": "..."}, Meta: mcp.Meta{MetaRun: "r"}}
	if state != "" {
		p.RequestState, p.InputResponses = state, mcp.InputResponseMap{question: &mcp.ElicitResult{Action: action}}
	}
	return p
}

func callRun(t *testing.T, cs *mcp.ClientSession, p *mcp.CallToolParams) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// manualClient is a client that can elicit but handles no multi-round-trip request itself: a
// question a run asks comes back to the test as input_required, answered by a retry.
func manualClient() *mcp.ClientOptions {
	return &mcp.ClientOptions{ElicitationHandler: (&person{}).handler, MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}}
}

// connectOn connects a client to a server for a over led, with keys for its request states.
func connectOn(t *testing.T, a Agent, led budget.Ledger, keys *StateKeys, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return connectAt(t, a, &Options{Ledger: led, StateKeys: keys, Logger: discard(), Drain: drainAtCleanup(t)}, opts, "")
}

// openLedger opens the SQLite ledger in dir, as one process of the server does; the caller
// closes it.
func openLedger(t *testing.T, dir string) *sqlite.Ledger {
	t.Helper()
	l, err := sqlite.Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// pausedOn runs the program on a server of ledger led until it asks, and returns the state and
// the question.
func (px *pauseFixture) pausedOn(t *testing.T, led budget.Ledger, keys *StateKeys) (state, question string) {
	t.Helper()
	manual := manualClient()
	cs := connectOn(t, px.agent(), led, keys, manual)
	res := callRun(t, cs, runParams("", "", ""))
	if !res.NeedsInput() || len(res.InputRequests) != 1 {
		t.Fatalf("want input_required, got %s", testkit.Text(res))
	}
	for id := range res.InputRequests {
		question = id
	}
	return res.RequestState, question
}

func resultOfRun(t *testing.T, res *mcp.CallToolResult) execution.Result {
	t.Helper()
	b, err := json.Marshal(res.Meta[MetaReport])
	if err != nil {
		t.Fatal(err)
	}
	var r execution.Result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return r
}

// TestPausedProgramResumes: a program paused on an approval whose process is gone (its
// ledger owner closed, as a killed process's is) is carried on by another process on the same
// ledger when the retry reaches it: run again from its start with the calls before the pause
// answered from the journal (the upstream's counter does not move for them), the approved
// call made once, the rest live; the result says resumed with 1 call replayed. A replay of
// the same retry is refused and calls nothing.
func TestPausedProgramResumes(t *testing.T) {
	px := newPauseFixture(t)
	dir := t.TempDir()
	keys := RandomStateKeys()
	first := openLedger(t, dir)
	state, q := px.pausedOn(t, first, keys)
	if n := px.counted.Load(); n != 1 {
		t.Fatalf("count ran %d times before the pause, want 1", n)
	}
	first.Close() // the holder is gone
	second := openLedger(t, dir)
	t.Cleanup(func() { second.Close() })
	cs := connectOn(t, px.agent(), second, keys, nil)
	res := callRun(t, cs, runParams(state, q, "accept"))
	r := resultOfRun(t, res)
	if r.Failure != nil || r.Resumed == nil || r.Resumed.ReplayedCalls != 1 {
		t.Fatalf("resumed: failure %+v, resumed %+v; %s", r.Failure, r.Resumed, testkit.Text(res))
	}
	if got := px.programSaw(); got != `"before#1","wiped x","after#2"` {
		t.Errorf("the resumed program saw %s", got)
	}
	if c, w := px.counted.Load(), px.wiped.Load(); c != 2 || w != 1 {
		t.Errorf("count ran %d times, wipe %d; want 2 (before once, after once) and 1", c, w)
	}
	if p, err := second.Pause(context.Background(), q); err != nil || p.Status != budget.ApprovalAccepted || !p.Claimed || p.Tool != "up__wipe" {
		t.Errorf("the pause: %+v, %v", p, err)
	}
	again := callRun(t, cs, runParams(state, q, "accept"))
	if msg := testkit.Text(again); !again.IsError || !strings.Contains(msg, "already answered") {
		t.Errorf("the retry replayed: %s", msg)
	}
	if w := px.wiped.Load(); w != 1 {
		t.Errorf("wipe ran %d times after a replayed retry", w)
	}
}

// TestResumedProgramDiverges (must show 5): a program that takes another path when run again
// (it read the clock) ends replay_diverged naming the call, and nothing at or past the
// divergence is made: the approved wipe never runs and count only ran in the first run.
func TestResumedProgramDiverges(t *testing.T) {
	px := newPauseFixture(t)
	px.diverge = true
	dir := t.TempDir()
	keys := RandomStateKeys()
	first := openLedger(t, dir)
	state, q := px.pausedOn(t, first, keys)
	first.Close()
	second := openLedger(t, dir)
	t.Cleanup(func() { second.Close() })
	cs := connectOn(t, px.agent(), second, keys, nil)
	r := resultOfRun(t, callRun(t, cs, runParams(state, q, "accept")))
	if r.Failure == nil || r.Failure.Kind != "replay_diverged" || !strings.Contains(r.Failure.Message, "call 1 was up__count") ||
		!strings.Contains(r.Failure.Message, `"clock"`) || r.Resumed == nil {
		t.Errorf("diverged: %+v, resumed %+v", r.Failure, r.Resumed)
	}
	if c, w := px.counted.Load(), px.wiped.Load(); c != 1 || w != 0 {
		t.Errorf("count ran %d times, wipe %d; want 1 (the first run's) and 0", c, w)
	}
}

// TestPauseHeldByALiveProcess (must show 2's mechanism): a retry reaching a process that does
// not hold the call while its holder is alive records the answer and never runs the program
// itself; the holder, seeing the answer in the ledger, carries its own call on and relays
// what it came to through the ledger, which the retry returns. A retry reaching the holder
// later collects the same result. The program started once and the call was made once.
func TestPauseHeldByALiveProcess(t *testing.T) {
	px := newPauseFixture(t)
	dir := t.TempDir()
	keys := RandomStateKeys()
	open := func() *sqlite.Ledger {
		l := openLedger(t, dir)
		t.Cleanup(func() { l.Close() })
		return l
	}
	quick := 20 * time.Millisecond
	manual := manualClient()
	held := connectAt(t, px.agent(), &Options{Ledger: open(), StateKeys: keys, Logger: discard(), Drain: drainAtCleanup(t), PausePoll: quick}, manual, "")
	res := callRun(t, held, runParams("", "", ""))
	var q string
	for id := range res.InputRequests {
		q = id
	}
	other := connectAt(t, px.agent(), &Options{Ledger: open(), StateKeys: keys, Logger: discard(), Drain: drainAtCleanup(t), PausePoll: quick}, nil, "")
	r := resultOfRun(t, callRun(t, other, runParams(res.RequestState, q, "accept")))
	if r.Failure != nil || r.Resumed != nil || string(r.Value) != "null" {
		t.Errorf("the retry at another process: %+v", r)
	}
	if got := px.programSaw(); got != `"before#1","wiped x","after#2"` || px.starts.Load() != 1 {
		t.Errorf("the program saw %s in %d starts; want the answer taken, one start", got, px.starts.Load())
	}
	again := resultOfRun(t, callRun(t, held, runParams(res.RequestState, q, "decline")))
	if again.Failure != nil || again.Approvals.Accepted != 1 {
		t.Errorf("collected at the holder: %+v", again)
	}
	replayed := callRun(t, other, runParams(res.RequestState, q, "accept"))
	if msg := testkit.Text(replayed); !replayed.IsError || !strings.Contains(msg, "already answered") {
		t.Errorf("the state replayed at the other process: %s", msg)
	}
	if w, c := px.wiped.Load(), px.counted.Load(); w != 1 || c != 2 {
		t.Errorf("wipe ran %d times, count %d; want 1 and 2", w, c)
	}
}

// TestApprovalsRoute (must show 6, the HTTP side): /v1/approvals refuses a request without a
// token (401) and a tenant's token (403), and answers the operator's token: the pending
// approvals with tenant, tool and the arguments as the person was shown them, in full (issue
// 38: a DROP TABLE past the first 200 bytes of a value is there); approve decides one once
// (409 after, 404 for an unknown one), recorded with who decided, and the list no longer has
// it. An approval kept without its view (an older version's) is listed with why, and can be
// denied, not approved (422).
func TestApprovalsRoute(t *testing.T) {
	led, err := sqlite.Open(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	now := time.Now()
	sql := `"SELECT name FROM users WHERE id IN (` + strings.Repeat("1, ", 100) + `2); DROP TABLE users"`
	view := "  sql = " + sql + "\n  password = [redacted]\nNot shown: password (the tool's schema marks it a password)\n"
	for _, p := range []budget.Pause{
		{ID: "q_1", Tenant: "t", Agent: "a", Tool: "up__wipe", Arguments: `{"password":"[redacted]","sql":"SELECT name…"}`, View: view,
			Resumable: true, AskedAt: now, Expires: now.Add(time.Hour)},
		{ID: "q_cut", Tenant: "t", Agent: "a", Tool: "up__wipe", Arguments: `{"sql":"SELECT name…"}`, AskedAt: now.Add(time.Second),
			Expires: now.Add(time.Hour)},
	} {
		if err := led.SavePause(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(HTTPHandler(&HTTPOptions{
		Agents:       []Agent{{Tenant: "t", Name: "a"}},
		Authenticate: func(tok string) (string, bool) { return "t", tok == "tenant-token" },
		Operator:     func(tok string) bool { return tok == "operator-token" },
		Loopback:     true,
		Server:       &Options{Ledger: led, Logger: discard(), Drain: drainAtCleanup(t)},
		Logger:       discard(),
	}))
	t.Cleanup(srv.Close)
	do := func(method, path, token, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, _ := do("GET", "/v1/approvals", "", ""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}
	if code, body := do("GET", "/v1/approvals", "tenant-token", ""); code != http.StatusForbidden || !strings.Contains(body, "operator token") {
		t.Errorf("a tenant's token: %d %s, want 403", code, body)
	}
	if code, _ := do("POST", "/v1/approvals/q_1/approve", "tenant-token", ""); code != http.StatusForbidden {
		t.Errorf("a tenant's token approving: %d, want 403", code)
	}
	code, body := do("GET", "/v1/approvals", "operator-token", "")
	var list []approval.Entry
	if err := json.Unmarshal([]byte(body), &list); err != nil || code != http.StatusOK || len(list) != 2 || list[0].ID != "q_1" ||
		list[0].Tenant != "t" || list[0].Tool != "up__wipe" || list[0].Arguments != view || list[0].NotShown != "" ||
		list[1].ID != "q_cut" || list[1].Arguments != "" || !strings.Contains(list[1].NotShown, "not kept in full") {
		t.Fatalf("the operator's list: %d %s", code, body)
	}
	if code, body := do("POST", "/v1/approvals/q_cut/approve", "operator-token", ""); code != http.StatusUnprocessableEntity ||
		!strings.Contains(body, "not kept in full") {
		t.Errorf("approving an approval whose view was cut: %d %s, want 422", code, body)
	}
	if code, body := do("POST", "/v1/approvals/q_cut/deny", "operator-token", ""); code != http.StatusOK || !strings.Contains(body, `"status":"declined"`) {
		t.Errorf("denying it: %d %s", code, body)
	}
	if code, body := do("POST", "/v1/approvals/q_1/approve", "operator-token", `{"by":"ann"}`); code != http.StatusOK || !strings.Contains(body, `"status":"accepted"`) {
		t.Errorf("approve: %d %s", code, body)
	}
	if code, body := do("POST", "/v1/approvals/q_1/deny", "operator-token", ""); code != http.StatusConflict || !strings.Contains(body, "accepted by operator ann") {
		t.Errorf("deny after approve: %d %s, want 409", code, body)
	}
	if code, _ := do("POST", "/v1/approvals/q_none/approve", "operator-token", ""); code != http.StatusNotFound {
		t.Errorf("an unknown approval: %d, want 404", code)
	}
	if code, body := do("GET", "/v1/approvals", "operator-token", ""); code != http.StatusOK || strings.TrimSpace(body) != "[]" {
		t.Errorf("the list after: %d %s", code, body)
	}
	if code, _ := do("POST", "/mcp", "operator-token", `{}`); code != http.StatusUnauthorized {
		t.Errorf("the operator's token on /mcp: %d, want 401 (it admits nothing else)", code)
	}
}

// TestPauseWithCallsInFlight: a program paused while another of its calls was still in flight
// is not run again from its journal when its holder is gone, since that call's outcome is
// unknown: the retry is refused and neither call is made again.
func TestPauseWithCallsInFlight(t *testing.T) {
	f, wiped := approvalUpstream(t)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	var blocked atomic.Int32
	mcp.AddTool(f.srv, &mcp.Tool{Name: "block", Description: "Blocks."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			blocked.Add(1)
			select {
			case started <- struct{}{}: // the blocking call has reached the upstream
			default:
			}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "unblocked"}}}, nil, nil
		})
	t.Cleanup(func() { close(release) })
	sb := fakeSandbox{run: func(ctx context.Context, ex engine.Execution) *engine.Outcome {
		done := make(chan struct{})
		go func() {
			defer close(done)
			ex.Tools.CallTool(ctx, "up__block", json.RawMessage(`{"s":"b"}`))
		}()
		<-started // the blocking call has reached the upstream
		ex.Tools.CallTool(ctx, "up__wipe", json.RawMessage(`{"s":"x"}`))
		<-done
		return ok(`null`)(ctx, ex)
	}}
	u := f.upstreams(false)
	u.ApprovalTimeout = time.Hour
	a := Agent{Tenant: "t", Name: "a", Upstreams: u, CodeExecution: &CodeExec{Sandbox: sb, Terms: testTerms}}
	dir := t.TempDir()
	keys := RandomStateKeys()
	first := openLedger(t, dir)
	manual := manualClient()
	cs := connectOn(t, a, first, keys, manual)
	res := callRun(t, cs, runParams("", "", ""))
	if !res.NeedsInput() {
		t.Fatalf("want input_required, got %s", testkit.Text(res))
	}
	var q string
	for id := range res.InputRequests {
		q = id
	}
	first.Close()
	second := openLedger(t, dir)
	t.Cleanup(func() { second.Close() })
	if p, err := second.Pause(context.Background(), q); err != nil || p.Resumable {
		t.Fatalf("the pause with a call in flight: %+v, %v; want kept, not resumable", p, err)
	}
	cs2 := connectOn(t, a, second, keys, nil)
	refused := callRun(t, cs2, runParams(res.RequestState, q, "accept"))
	if msg := testkit.Text(refused); !refused.IsError || !strings.Contains(msg, "cannot be carried on by another process") {
		t.Errorf("the retry: %s", msg)
	}
	if w, b := wiped.Load(), blocked.Load(); w != 0 || b != 1 {
		t.Errorf("wipe ran %d times, block %d; want 0 and 1 (never again)", w, b)
	}
}
