package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/binding"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/egress"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/execution"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
)

// fakeSandbox answers from a function; it never starts a process.
type fakeSandbox struct {
	run func(ctx context.Context, ex engine.Execution) *engine.Outcome
}

func (f fakeSandbox) Run(ctx context.Context, ex engine.Execution) *engine.Outcome {
	return f.run(ctx, ex)
}
func (f fakeSandbox) Describe(context.Context) *engine.Description {
	return &engine.Description{Ready: true}
}

var testTerms = engine.Terms{Limits: engine.DefaultLimits, Network: engine.NetworkNone, Isolation: engine.LevelProcess}

func ok(value string) func(context.Context, engine.Execution) *engine.Outcome {
	return func(_ context.Context, ex engine.Execution) *engine.Outcome {
		r := engine.Refuse(ex.Terms, "", "")
		r.Failure = nil
		r.Value = json.RawMessage(value)
		return r
	}
}

func connect(t *testing.T, a Agent, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return connectWith(t, a, nil, opts)
}

// connectWith serves a with server options so (a ledger, a blob store).
func connectWith(t *testing.T, a Agent, so *Options, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return connectAt(t, a, so, opts, "")
}

// connectAt is connectWith for a client of MCP revision version ("" for go-sdk's latest).
func connectAt(t *testing.T, a Agent, so *Options, opts *mcp.ClientOptions, version string) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := NewServer(a, so).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	var co *mcp.ClientSessionOptions
	if version != "" {
		co = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, opts).Connect(ctx, ct, co)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func TestToolsOffered(t *testing.T) {
	for _, c := range []struct {
		agent Agent
		want  string
	}{
		{Agent{Tenant: "t", Name: "a"}, "get_tool_info,list_tools,read_tool_output"},
		{Agent{Tenant: "t", Name: "a", CodeExecution: &CodeExec{Sandbox: fakeSandbox{ok("1")}, Terms: testTerms}}, "get_tool_info,list_tools,read_tool_output,run_code"},
	} {
		res, err := connect(t, c.agent, nil).ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
			if tl.Name == ToolRunCode && !strings.Contains(tl.Description, "wall clock 30s") {
				t.Errorf("run_code description does not state the limits in force: %s", tl.Description)
			}
		}
		if got := strings.Join(names, ","); got != c.want {
			t.Errorf("tools = %s, want %s", got, c.want)
		}
	}
}

func TestRunCodeResult(t *testing.T) {
	a := Agent{Tenant: "t", Name: "a", Version: "sha256:abc", CodeExecution: &CodeExec{Sandbox: fakeSandbox{ok("42")}, Terms: testTerms}}
	cs := connect(t, a, nil)
	if !strings.Contains(cs.InitializeResult().Instructions, "sha256:abc") {
		t.Errorf("instructions lack the agent version: %q", cs.InitializeResult().Instructions)
	}
	res := call(t, cs, ToolRunCode, map[string]any{"code": "6*7"})
	if res.IsError || res.Meta[MetaAgentVersion] != "sha256:abc" {
		t.Fatalf("isError %v meta %v", res.IsError, res.Meta)
	}
	b, _ := json.Marshal(res.Meta[MetaReport])
	var r execution.Result
	if err := json.Unmarshal(b, &r); err != nil || string(r.Value) != "42" || r.Terms.WallSeconds != 30 {
		t.Fatalf("_meta report %s: %v", b, err)
	}
	// What the model reads: the value, and of the report what is not as asked (here the fake
	// sandbox's grades, none enforced).
	if b, _ := json.Marshal(res.StructuredContent); !strings.HasPrefix(string(b), `{"guarantees":{"cpu":"unavailable",`) ||
		!strings.HasSuffix(string(b), `,"value":42}`) || strings.Contains(string(b), "terms") {
		t.Errorf("structuredContent %s", b)
	}
	if !strings.Contains(testkit.Text(res), "value: 42") {
		t.Errorf("text: %s", testkit.Text(res))
	}
	// A missing argument is a tool error the model can fix, not a protocol error.
	if res := call(t, cs, ToolRunCode, map[string]any{}); !res.IsError {
		t.Errorf("run_code without code: %s", testkit.Text(res))
	}
}

func TestRunCodeFailureAndRefusal(t *testing.T) {
	fail := func(_ context.Context, ex engine.Execution) *engine.Outcome {
		r := engine.Refuse(ex.Terms, failure.ProgramError, "ValueError: boom")
		r.Failure.Executed = true
		r.Failure.Traceback = "Traceback (most recent call last):\nValueError: boom"
		return r
	}
	cs := connect(t, Agent{Tenant: "t", Name: "a", CodeExecution: &CodeExec{Sandbox: fakeSandbox{fail}, Terms: testTerms}}, nil)
	res := call(t, cs, ToolRunCode, map[string]any{"code": "raise ValueError('boom')"})
	if !res.IsError || !strings.Contains(testkit.Text(res), "Traceback") || !strings.Contains(testkit.Text(res), "program_error") {
		t.Errorf("program failure: isError %v, text %s", res.IsError, testkit.Text(res))
	}

	ran := false
	refuse := func(_ context.Context, ex engine.Execution) *engine.Outcome { ran = true; return ok("1")(nil, ex) }
	cs = connect(t, Agent{Tenant: "t", Name: "a", CodeExecution: &CodeExec{Sandbox: fakeSandbox{refuse}, Terms: testTerms, Refusal: "policy says no network"}}, nil)
	res = call(t, cs, ToolRunCode, map[string]any{"code": "1"})
	if !res.IsError || ran || !strings.Contains(testkit.Text(res), "network_unavailable") {
		t.Errorf("refusal: isError %v, ran %v, text %s", res.IsError, ran, testkit.Text(res))
	}
	if res := call(t, cs, ToolListTools, map[string]any{}); res.IsError {
		t.Errorf("list_tools after a refusal: %s", testkit.Text(res))
	}
}

func TestCatalogueTools(t *testing.T) {
	cs := connect(t, Agent{Tenant: "t", Name: "a"}, nil)
	res := call(t, cs, ToolListTools, map[string]any{"query": "x"})
	b, _ := json.Marshal(res.StructuredContent)
	if res.IsError || !strings.Contains(string(b), `"tools":[]`) {
		t.Errorf("list_tools: %s", b)
	}
	if res := call(t, cs, ToolGetToolInfo, map[string]any{"name": "docs__x"}); !res.IsError || !strings.Contains(testkit.Text(res), "docs__x") {
		t.Errorf("get_tool_info: %s", testkit.Text(res))
	}
	if res := call(t, cs, ToolReadToolOutput, map[string]any{"handle": "h_1"}); !res.IsError || testkit.Text(res) != binding.NoOutputKept {
		t.Errorf("read_tool_output: %s", testkit.Text(res))
	}
}

func TestProgressAndCancel(t *testing.T) {
	slow := func(ctx context.Context, ex engine.Execution) *engine.Outcome {
		for i := 1; ; i++ {
			select {
			case <-ctx.Done():
				r := engine.Refuse(ex.Terms, failure.Cancelled, "cancelled")
				r.Cancelled = true
				return r
			case <-time.After(50 * time.Millisecond):
				if ex.Progress != nil {
					ex.Progress(float64(i), nil)
				}
			}
		}
	}
	// With elicitation declared the program runs on a hold (mrtr.go): the same progress
	// reaches the waiting request, and its cancellation ends the program.
	for _, elicit := range []bool{false, true} {
		var mu sync.Mutex
		var got int
		opts := &mcp.ClientOptions{
			ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
				mu.Lock()
				got++
				mu.Unlock()
			},
		}
		if elicit {
			opts.ElicitationHandler = (&person{}).handler
		}
		cs := connect(t, Agent{Tenant: "t", Name: "a", CodeExecution: &CodeExec{Sandbox: fakeSandbox{slow}, Terms: testTerms}}, opts)
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolRunCode, Arguments: map[string]any{"code": "x"}, Meta: mcp.Meta{"progressToken": "p"}})
		cancel()
		if err == nil {
			t.Fatalf("elicitation %v: a cancelled call returned no error", elicit)
		}
		mu.Lock()
		if got < 2 {
			t.Errorf("elicitation %v: %d progress notifications, want several", elicit, got)
		}
		mu.Unlock()
	}
}

func TestHTTPHandlerAuth(t *testing.T) {
	agents := []Agent{{Tenant: "a", Name: "default"}, {Tenant: "a", Name: "other"}, {Tenant: "b", Name: "bee"},
		{Tenant: "c", Name: "left"}, {Tenant: "c", Name: "right"}}
	h := HTTPHandler(&HTTPOptions{
		Agents: agents,
		Authenticate: func(tok string) (string, bool) {
			switch tok {
			case "ta":
				return "a", true
			case "tb":
				return "b", true
			case "tc":
				return "c", true
			}
			return "", false
		},
		Loopback: true,
		Ready:    func() bool { return false },
		Server:   &Options{Drain: drainAtCleanup(t)},
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"0"}}}`
	bodies := map[string]string{}
	for _, c := range []struct {
		name, method, path, token, host, origin string
		want                                    int
	}{
		{"healthz", "GET", "/healthz", "", "", "", 200},
		{"readyz not ready", "GET", "/readyz", "", "", "", 503},
		{"no token", "POST", "/mcp", "", "", "", 401},
		{"bad token", "POST", "/mcp", "zz", "", "", 401},
		{"default agent", "POST", "/mcp", "ta", "", "", 200},
		{"named agent", "POST", "/mcp/other", "ta", "", "", 200},
		{"another tenant's agent", "POST", "/mcp/bee", "ta", "", "", 404},
		{"no such agent", "POST", "/mcp/nobody", "ta", "", "", 404},
		{"tenant without default", "POST", "/mcp", "tb", "", "", 200},
		{"no default", "POST", "/mcp", "tc", "", "", 404},
		{"foreign host", "POST", "/mcp", "ta", "evil.example:80", "", 403},
		{"cross origin", "POST", "/mcp", "ta", "", "http://evil.example", 403},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
		if c.method == "POST" {
			req, _ = http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(init))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
		}
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		if c.host != "" {
			req.Host = c.host
		}
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
			req.Header.Set("Sec-Fetch-Site", "cross-site")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: status %d, want %d", c.name, resp.StatusCode, c.want)
		}
		// Without a challenge, MCP clients (Inspector among them) start OAuth discovery.
		if got := resp.Header.Get("WWW-Authenticate"); c.want == 401 && !strings.HasPrefix(got, "Bearer") {
			t.Errorf("%s: WWW-Authenticate %q, want a Bearer challenge", c.name, got)
		}
		bodies[c.name] = string(body)
	}
	// An agent of another tenant reads exactly like one nobody has (but for the name asked
	// for, echoed): names cannot be probed.
	if strings.ReplaceAll(bodies["another tenant's agent"], "bee", "X") != strings.ReplaceAll(bodies["no such agent"], "nobody", "X") {
		t.Errorf("another tenant's agent answers %q, an unknown one %q", bodies["another tenant's agent"], bodies["no such agent"])
	}
	// Both, and /mcp without a default agent, are JSON that names what is missing and the
	// caller's own agents (issue 23: a bare "Not Found" told a newcomer nothing).
	for name, want := range map[string]routeProblem{
		"no such agent": {Error: "unknown_agent", Agent: "nobody", Agents: []string{"default", "other"}},
		"no default":    {Error: "no_default_agent", Agents: []string{"left", "right"}},
	} {
		var got routeProblem
		if err := json.Unmarshal([]byte(bodies[name]), &got); err != nil {
			t.Errorf("%s: body %q is not JSON: %v", name, bodies[name], err)
			continue
		}
		if got.Error != want.Error || got.Agent != want.Agent || !slices.Equal(got.Agents, want.Agents) ||
			!strings.Contains(got.Message, "/mcp/{agent}") || want.Agent != "" && !strings.Contains(got.Message, `"nobody"`) {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}
}

// A session created by one tenant cannot be used with another tenant's token.
func TestHTTPSessionBoundToTenant(t *testing.T) {
	h := HTTPHandler(&HTTPOptions{
		Agents: []Agent{{Tenant: "a", Name: "default"}, {Tenant: "b", Name: "default"}},
		Authenticate: func(tok string) (string, bool) {
			return map[string]string{"ta": "a", "tb": "b"}[tok], tok == "ta" || tok == "tb"
		},
		Server: &Options{Drain: drainAtCleanup(t)},
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	post := func(token, session, body string) *http.Response {
		req, _ := http.NewRequest("POST", srv.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	resp := post("ta", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"0"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, sid)
	}
	if resp := post("tb", sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); resp.StatusCode < 400 {
		t.Errorf("tenant b used tenant a's session: status %d", resp.StatusCode)
	}
}

func TestHTTPBodyLimit(t *testing.T) {
	h := HTTPHandler(&HTTPOptions{
		Agents:       []Agent{{Tenant: "a", Name: "default"}},
		Tokenless:    func() string { return "a" },
		MaxBodyBytes: 1 << 10,
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"` + strings.Repeat("x", 4<<10) + `"}}`
	req, _ := http.NewRequest("POST", srv.URL+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized body: status %d, want 413", resp.StatusCode)
	}
}

// endless is a request body that never ends, counting what was read of it.
type endless struct{ n atomic.Int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	e.n.Add(int64(len(p)))
	return len(p), nil
}

// TestHTTPBodyLimitStreamed sends an endless body without a Content-Length: the server answers
// 413 after reading about the limit, instead of reading the body whole first.
func TestHTTPBodyLimitStreamed(t *testing.T) {
	h := HTTPHandler(&HTTPOptions{
		Agents:       []Agent{{Tenant: "a", Name: "default"}},
		Tokenless:    func() string { return "a" },
		MaxBodyBytes: 1 << 10,
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	body := &endless{}
	prefix := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"`)
	ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(10*time.Second))
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/mcp", io.MultiReader(prefix, io.LimitReader(body, 256<<20)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST: %v (%d bytes sent)", err, body.n.Load())
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("status %d, want 413", resp.StatusCode)
	}
	if n := body.n.Load(); n > 64<<20 {
		t.Errorf("%d bytes of the body were consumed before the answer", n)
	}
}

// renderLean is the text a model reads of res.
func renderLean(res *execution.Result) string { return RenderText(Lean(res, budget.Limits{})) }

func TestRenderTextPreviewsALargeValue(t *testing.T) {
	big := `"` + strings.Repeat("x", 100000) + `"`
	text := renderLean(&execution.Result{Outcome: engine.Outcome{Value: json.RawMessage(big)}})
	if len(text) > 5000 || !strings.Contains(text, "elided") {
		t.Fatalf("a 100 kB value rendered as %d bytes of text", len(text))
	}
}

// drainAtCleanup is a Drain whose Close ends, when the test does, the sessions that raw HTTP
// requests opened and never closed.
func drainAtCleanup(t *testing.T) *Drain {
	d := NewDrain()
	t.Cleanup(func() {
		if !d.Close(gate.Scaled(5 * time.Second)) {
			t.Error("the drain's sessions did not close")
		}
	})
	return d
}

// A value JSON cannot carry reaches the model as its repr, marked as such, and the program
// counts as completed; a long repr is previewed like a long value.
func TestRenderTextShowsAValueRepr(t *testing.T) {
	repr := "{1, 2}"
	text := renderLean(&execution.Result{Outcome: engine.Outcome{Value: json.RawMessage("null"), ValueRepr: &repr}})
	if !strings.HasPrefix(text, "completed") || !strings.Contains(text, "value (no JSON for it; its repr): {1, 2}\n") {
		t.Fatalf("text:\n%s", text)
	}
	long := strings.Repeat("y", 100000)
	if text := renderLean(&execution.Result{Outcome: engine.Outcome{Value: json.RawMessage("null"), ValueRepr: &long}}); len(text) > 5000 || !strings.Contains(text, "elided") {
		t.Fatalf("a 100 kB repr rendered as %d bytes of text", len(text))
	}
}

// A small text artifact is shown whole, with its handle, rather than costing a read; a large
// or binary one is named with its handle.
func TestRenderTextShowsASmallTextArtifact(t *testing.T) {
	csv := "sku,count\nA,1\n"
	text := renderLean(&execution.Result{Outcome: engine.Outcome{Value: json.RawMessage("null"), Artifacts: []outputs.Attachment{
		{Name: "out/data.csv", Handle: "h_1", ContentType: "text/csv", Size: int64(len(csv)), Location: "inline", Text: &csv},
		{Name: "plot.png", Handle: "h_2", ContentType: "image/png", Size: 264, Location: "blob"},
	}}})
	if !strings.Contains(text, "artifact out/data.csv (14 bytes, handle h_1):\nsku,count\nA,1\n") {
		t.Errorf("the csv is not shown whole:\n%s", text)
	}
	if !strings.Contains(text, "artifact plot.png: 264 bytes, image/png, handle h_2\n") {
		t.Errorf("the png is not named with its handle:\n%s", text)
	}
}

// A result says the isolation level the terms asked for and the one reached when they differ,
// in words that do not read as a downgrade (issue 23: "isolation process; achieved isolation
// isolated"); when they are the same it says neither.
func TestRenderTextSaysIsolationAskedAndGot(t *testing.T) {
	res := &execution.Result{Outcome: engine.Outcome{Value: json.RawMessage("null"),
		Terms:     engine.Terms{Limits: engine.DefaultLimits, Isolation: engine.LevelProcess},
		Isolation: engine.LevelIsolated}}
	if text := renderLean(res); !strings.Contains(text, "isolation: asked for process, got isolated") || strings.Contains(text, "achieved") ||
		strings.Count(text, "isolation") != 1 {
		t.Errorf("text:\n%s", text)
	}
	res.Isolation = engine.LevelProcess
	if text := renderLean(res); strings.Contains(text, "isolation") {
		t.Errorf("the level asked and reached is said:\n%s", text)
	}
}

// Under network rules the text says what the egress proxy decided, the first refusals named.
func TestRenderTextSaysTheNetworkDecisions(t *testing.T) {
	var refused []egress.Refusal
	for i := range 7 {
		refused = append(refused, egress.Refusal{Host: fmt.Sprintf("h%d.example", i), Port: 443, Reason: egress.ReasonNotAllowed})
	}
	text := renderLean(&execution.Result{Outcome: engine.Outcome{Value: json.RawMessage("null"),
		Network: &egress.Stats{Allowed: 3, Refused: refused}}})
	if !strings.Contains(text, "network: 3 requests allowed, refused: h0.example:443 not_allowed, ") ||
		!strings.Contains(text, "h4.example:443 not_allowed and 2 more\n") {
		t.Errorf("text:\n%s", text)
	}
}
