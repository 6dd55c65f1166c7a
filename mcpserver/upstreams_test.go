package mcpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/execution"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

type echoIn struct {
	S string `json:"s"`
}

func echoTool(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo " + in.S}}}, nil, nil
}

// upstreamFixture serves a go-sdk server "up" over streamable HTTP on loopback, with a Pool
// whose tools/list_changed reaches the servers that Watch.
type upstreamFixture struct {
	srv  *mcp.Server
	pool *upstream.Pool

	mu       sync.Mutex
	watchers []func()
}

func newUpstreamFixture(t *testing.T) *upstreamFixture {
	t.Helper()
	f := &upstreamFixture{srv: mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)}
	mcp.AddTool(f.srv, &mcp.Tool{Name: "echo", Description: "Echoes."}, echoTool)
	mcp.AddTool(f.srv, &mcp.Tool{Name: "secret", Description: "Denied by policy."}, echoTool)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.srv }, nil))
	t.Cleanup(ts.Close)
	pool, err := upstream.NewPool(&upstream.PoolOptions{
		Servers: []upstream.Server{{Name: "up", URL: ts.URL}},
		OnToolsChanged: func(string) {
			f.mu.Lock()
			ws := slices.Clone(f.watchers)
			f.mu.Unlock()
			for _, w := range ws {
				w()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	f.pool = pool
	return f
}

func (f *upstreamFixture) upstreams(expose bool) *Upstreams {
	return &Upstreams{
		Catalogue: f.pool.Catalogue,
		Grant:     []string{"up"},
		Deny:      []string{"up__secret"},
		Expose:    expose,
		Watch: func(changed func()) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.watchers = append(f.watchers, changed)
		},
	}
}

func listed(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// Exposed tools follow the policy, are called directly, and an upstream's list change reaches
// the host as tools/list_changed with the new tool listed.
func TestExposedUpstreamTools(t *testing.T) {
	f := newUpstreamFixture(t)
	changed := make(chan struct{}, 16)
	cs := connect(t, Agent{Tenant: "t", Name: "a", Upstreams: f.upstreams(true)}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	names := listed(t, cs)
	if !slices.Contains(names, "up__echo") || slices.Contains(names, "up__secret") {
		t.Fatalf("tools/list = %v: want up__echo and not the denied up__secret", names)
	}
	res := call(t, cs, "up__echo", map[string]any{"s": "hi"})
	if res.IsError || testkit.Text(res) != "echo hi" {
		t.Fatalf("direct call: %v %q", res.IsError, testkit.Text(res))
	}
	time.Sleep(200 * time.Millisecond) // go-sdk batches list_changed; let the first ones pass
	for len(changed) > 0 {
		<-changed
	}

	mcp.AddTool(f.srv, &mcp.Tool{Name: "late", Description: "Added later."}, echoTool)
	deadline := time.After(gate.Scaled(10 * time.Second))
	for {
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("no tools/list_changed listing up__late reached the host after the upstream's list changed")
		}
		if slices.Contains(listed(t, cs), "up__late") {
			return
		}
	}
}

// Without expose_upstream_tools nothing is added to tools/list, but list_tools and
// get_tool_info answer from the catalogue, and run_code gets the turn's names and a caller.
func TestBindingsReachTheEngine(t *testing.T) {
	f := newUpstreamFixture(t)
	var got engine.Execution
	var reply toolcall.Answer
	sb := fakeSandbox{run: func(ctx context.Context, ex engine.Execution) *engine.Outcome {
		got = ex
		reply = ex.Tools.CallTool(ctx, "up__secret", json.RawMessage(`{}`))
		return ok(`null`)(ctx, ex)
	}}
	u := f.upstreams(false)
	u.Bindings = &[]string{"up__echo", "up__gone"}
	cs := connect(t, Agent{Tenant: "t", Name: "a", Upstreams: u, CodeExecution: &CodeExec{Sandbox: sb, Terms: testTerms}}, nil)
	if names := listed(t, cs); slices.ContainsFunc(names, func(n string) bool { return strings.Contains(n, "__") }) {
		t.Errorf("tools/list = %v: nothing is exposed without expose_upstream_tools", names)
	}
	res := call(t, cs, ToolListTools, nil)
	if !strings.Contains(testkit.Text(res), "up__echo") {
		t.Errorf("list_tools = %s", testkit.Text(res))
	}
	res = call(t, cs, ToolGetToolInfo, map[string]any{"name": "up__echo"})
	if res.IsError || !strings.Contains(testkit.Text(res), `"input_schema"`) {
		t.Errorf("get_tool_info = %s", testkit.Text(res))
	}
	res = call(t, cs, ToolRunCode, map[string]any{"code": "pass"})
	if !slices.Equal(got.ToolNames, []string{"up__echo"}) {
		t.Errorf("ToolNames = %v", got.ToolNames)
	}
	if reply.Kind != "denied" {
		t.Errorf("call of a denied tool = %+v, want kind denied", reply)
	}
	var r struct {
		Unavailable []string `json:"unavailable_bindings"`
	}
	b, _ := json.Marshal(res.Meta[MetaReport])
	_ = json.Unmarshal(b, &r)
	if !slices.Equal(r.Unavailable, []string{"up__gone"}) {
		t.Errorf("unavailable_bindings = %v", r.Unavailable)
	}
}

// TestListToolsTextOneLinePerTool: the list the model reads has one line per tool and one per
// server problem, whatever the reasons and problems say.
func TestListToolsTextOneLinePerTool(t *testing.T) {
	alias := "up__ok"
	page := upstream.ListToolsPage{
		Tools: []upstream.ToolSummary{
			{Name: "up__ok", Alias: &alias, Server: "up", Description: "Fine."},
			{Name: "up__loop", Server: "up", Description: "Loops.", Unavailable: "its input schema refers to itself\nup__forged: x"},
		},
		Problems: map[string]string{"up": "2 tools skipped\r\nup__forged2: y"},
	}
	got := strings.Split(listToolsText(page), "\n")
	want := []string{
		"up__ok (alias): Fine.",
		"up__loop: Loops. [unavailable: its input schema refers to itself up__forged: x]",
		"note on server up: 2 tools skipped  up__forged2: y",
	}
	if !slices.Equal(got, want) {
		t.Errorf("list_tools text:\n%q\nwant\n%q", got, want)
	}
}

// A granted server that could not be started is told to the model with its reason: in
// list_tools and in every run_code result (its tools are missing from TOOLS and have no alias,
// so a program that used one died of a NameError), not only in the operator's log.
func TestAFailedUpstreamIsToldToTheModel(t *testing.T) {
	pool, err := upstream.NewPool(&upstream.PoolOptions{
		Servers: []upstream.Server{{Name: "gone", Command: []string{"/nonexistent/mcp-server"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	sb := fakeSandbox{run: ok(`null`)}
	u := &Upstreams{Catalogue: pool.Catalogue, Grant: []string{"gone"}}
	cs := connect(t, Agent{Tenant: "t", Name: "a", Upstreams: u, CodeExecution: &CodeExec{Sandbox: sb, Terms: testTerms}}, nil)
	const reason = `upstream server "gone" is unavailable: its command was not found`
	if res := call(t, cs, ToolListTools, nil); !strings.Contains(testkit.Text(res), reason) {
		t.Errorf("list_tools text %q does not say %q", testkit.Text(res), reason)
	}
	res := call(t, cs, ToolRunCode, map[string]any{"code": "pass"})
	if !strings.Contains(testkit.Text(res), reason) {
		t.Errorf("run_code text %q does not say %q", testkit.Text(res), reason)
	}
	var r struct {
		Problems []execution.UpstreamProblem `json:"upstream_problems"`
	}
	b, _ := json.Marshal(res.Meta[MetaReport])
	_ = json.Unmarshal(b, &r)
	if len(r.Problems) != 1 || r.Problems[0].Server != "gone" || r.Problems[0].Problem != reason {
		t.Errorf("upstream_problems = %+v", r.Problems)
	}
}

// run_code is annotated readOnlyHint exactly when nothing a program can reach changes the
// world: no network, and every tool it is bound to read-only by its annotations. Without
// upstreams and without network it is from the start; granted a tool not annotated read-only
// it is not, and it becomes so, with tools/list_changed, when a policy change leaves the
// program read-only tools alone.
func TestRunCodeReadOnly(t *testing.T) {
	readOnly := func(cs *mcp.ClientSession) bool {
		t.Helper()
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range res.Tools {
			if tl.Name == ToolRunCode {
				return tl.Annotations != nil && tl.Annotations.ReadOnlyHint
			}
		}
		t.Fatal("run_code is not listed")
		return false
	}
	code := func(network engine.Network) *CodeExec {
		terms := testTerms
		terms.Network = network
		return &CodeExec{Sandbox: fakeSandbox{ok("1")}, Terms: terms}
	}
	if !readOnly(connect(t, Agent{Tenant: "t", Name: "a", CodeExecution: code(engine.NetworkNone)}, nil)) {
		t.Error("without upstreams or network, run_code is not read-only")
	}
	if readOnly(connect(t, Agent{Tenant: "t", Name: "a", CodeExecution: code(engine.NetworkUnrestricted)}, nil)) {
		t.Error("granted the network, run_code is read-only")
	}
	f := newUpstreamFixture(t)
	mcp.AddTool(f.srv, &mcp.Tool{Name: "look", Description: "Reads.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, echoTool)
	u := f.upstreams(false) // up__echo is bound, and not annotated read-only
	changed := make(chan struct{}, 8)
	cs := connect(t, Agent{Tenant: "t", Name: "a", CodeExecution: code(engine.NetworkNone), Upstreams: u},
		&mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
	if readOnly(cs) {
		t.Error("bound to a tool not annotated read-only, run_code is read-only")
	}
	for len(changed) > 0 {
		<-changed
	}
	u.SetPolicy(UpstreamPolicy{Grant: []string{"up"}, Deny: []string{"up__secret", "up__echo"}})
	if !readOnly(cs) {
		t.Error("bound to read-only tools only, run_code is not read-only")
	}
	select {
	case <-changed:
	case <-time.After(gate.Scaled(5 * time.Second)):
		t.Error("no tools/list_changed when run_code became read-only")
	}
	// An approval the policy asks for makes even a read-only tool a step outside.
	u.SetPolicy(UpstreamPolicy{Grant: []string{"up"}, Deny: []string{"up__secret", "up__echo"}, ApprovalRequired: []string{"up__look"}})
	if readOnly(cs) {
		t.Error("bound to a tool that needs approval, run_code is read-only")
	}
}
