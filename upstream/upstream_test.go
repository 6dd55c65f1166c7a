package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
)

var mockBin string

func TestMain(m *testing.M) {
	code := testkit.Run(m, func() (err error) {
		mockBin, err = testkit.BuildMockUpstream()
		return err
	})
	// Every goroutine has an owner that waits for it: none may outlive the tests.
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

type fixture struct {
	pool    *Pool
	counter string // the docs server's counter file
	logs    *testkit.Log
	changed chan string
}

// newFixture starts a pool with "docs" (the plain mock) and "big" (deferred, 351 extra tools
// in pages of 40), each with its own counter file.
func newFixture(t *testing.T, tweak func(*Server)) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{counter: filepath.Join(dir, "docs.json"), logs: &testkit.Log{}, changed: make(chan string, 16)}
	docs := Server{Name: "docs", Command: []string{mockBin}, Env: map[string]string{"MOCK_COUNTER_FILE": f.counter}}
	big := Server{Name: "big", Command: []string{mockBin, "--many", "351", "--page-size", "40"},
		Env: map[string]string{"MOCK_COUNTER_FILE": filepath.Join(dir, "big.json")}, Deferred: true}
	if tweak != nil {
		tweak(&docs)
	}
	p, err := NewPool(&PoolOptions{
		Servers:        []Server{docs, big},
		Logger:         slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnToolsChanged: func(s string) { f.changed <- s },
	})
	if err != nil {
		t.Fatal(err)
	}
	f.pool = p
	t.Cleanup(func() { p.Close() })
	return f
}

func (f *fixture) turn(t *testing.T, deny, approval []string, bindings *[]string) *Turn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(30*time.Second))
	defer cancel()
	cat := f.pool.Catalogue(ctx)
	if len(cat.Problems()) > 0 {
		t.Fatalf("catalogue problems: %v\nlogs:\n%s", cat.Problems(), f.logs)
	}
	return cat.Resolve([]string{"docs", "big"}, deny, approval, bindings)
}

// wantRuns fails t unless the docs mock really ran tool want times.
func (f *fixture) wantRuns(t *testing.T, tool string, want int) {
	t.Helper()
	if got := f.count(t, tool); got != want {
		t.Errorf("%s really called %d times, want %d", tool, got, want)
	}
}

// count reads how many times the docs mock really ran tool.
func (f *fixture) count(t *testing.T, tool string) int {
	t.Helper()
	b, err := os.ReadFile(f.counter)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int{}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m[tool]
}

// reply is an answer and what it spent, with the name called, as the tests below check it.
type reply struct {
	toolcall.Answer
	Spent
	Tool string
}

func call(t *testing.T, turn *Turn, name, args string) reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(30*time.Second))
	defer cancel()
	return callCtx(ctx, turn, name, json.RawMessage(args))
}

// callCtx makes a program's call through upstream's own steps, in the order package binding
// takes them: policy (Lookup), bindings, approval, arguments, the upstream call. Built-ins,
// budgets and paging are binding's, and its tests cover them.
func callCtx(ctx context.Context, turn *Turn, name string, args json.RawMessage) reply {
	tool, fe := turn.Lookup(name)
	if fe == nil && !turn.Bound(tool) {
		fe = failure.New(failure.Unavailable, "%s is not among this agent's bindings", name)
	}
	if fe == nil && turn.NeedsApproval(tool) {
		fe = failure.New(failure.ApprovalRequiredInProgram, "%s needs a person's approval", name)
	}
	var canon json.RawMessage
	if fe == nil {
		canon, fe = tool.Arguments(args)
	}
	if fe != nil {
		return reply{Answer: toolcall.Refused(fe), Tool: name}
	}
	a, spent := turn.Invoke(ctx, tool, canon)
	return reply{a, spent, name}
}

func wantOK(t *testing.T, r reply) string {
	t.Helper()
	if r.Kind != "" {
		t.Fatalf("%s: kind %q: %s", r.Tool, r.Kind, r.Message)
	}
	return string(r.Value)
}

func wantKind(t *testing.T, r reply, k failure.Kind) {
	t.Helper()
	if r.Kind != k {
		t.Fatalf("%s: kind %q (%s), want %q; value %s", r.Tool, r.Kind, r.Message, k, r.Value)
	}
	if r.Message == "" {
		t.Fatalf("%s: kind %q without a message", r.Tool, k)
	}
}

func TestGlob(t *testing.T) {
	for _, c := range []struct {
		pat, name string
		want      bool
	}{
		{"docs__*", "docs__x", true}, {"docs__*", "doc__x", false}, {"*delete*", "docs__delete-everything", true},
		{"docs__a", "docs__a", true}, {"docs__a", "docs__ab", false}, {"d*s__*g", "docs__everything", true},
		{"*", "", true}, {"a*b*c", "abxc", true}, {"a*b*c", "acb", false}, {"docs__[x]", "docs__x", true},
		{"docs__delete?", "docs__delete1", true}, {"docs__delete?", "docs__delete", false},
		{"docs__[dr]*", "docs__read", true}, {"docs__[dr]*", "docs__write", false},
		{`docs__\[x]`, "docs__[x]", true}, {"a*", "a/b/c", true}, {"a?c", "a/c", true}, {"docs__[", "docs__[", false},
	} {
		if got := glob(c.pat, c.name); got != c.want {
			t.Errorf("glob(%q, %q) = %v, want %v", c.pat, c.name, got, c.want)
		}
	}
}

// TestPolicyGlobSyntax pins that deny and approval_required use the path.Match syntax that
// configs validates: "?" and classes deny, not only "*".
func TestPolicyGlobSyntax(t *testing.T) {
	f := newFixture(t, nil)
	turn := f.turn(t, []string{"docs__list?repos"}, []string{"docs__[f]*"}, nil)
	wantKind(t, call(t, turn, "docs__list_repos", ""), failure.Denied)
	wantKind(t, call(t, turn, "docs__list-repos", ""), failure.Denied)
	wantKind(t, call(t, turn, "docs__fail", ""), failure.ApprovalRequiredInProgram)
}

// TestConnectFailureNotCalled checks that a call whose server cannot be reached is not
// recorded as spent.
func TestConnectFailureNotCalled(t *testing.T) {
	p, err := NewPool(&PoolOptions{
		Servers: []Server{{Name: "gone", Command: []string{"/nonexistent/mock-server"}}},
		Logger:  slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cat := p.Catalogue(context.Background())
	tool := &Tool{Name: "gone__x", Server: "gone", Upstream: "x"}
	turn := cat.Resolve([]string{"gone"}, nil, nil, nil)
	r, spent := turn.Invoke(context.Background(), tool, json.RawMessage(`{}`))
	if r.Kind != failure.UpstreamError || spent.Called {
		t.Errorf("reply = %+v, want upstream_error with Called false", r)
	}
}

func TestRedactErr(t *testing.T) {
	err := fmt.Errorf("connecting: %w", &url.Error{Op: "Post", URL: "https://u:pw@h.example/mcp?key=s3cret#frag", Err: errors.New("refused")})
	got := redactErr(err).Error()
	if strings.Contains(got, "s3cret") || strings.Contains(got, "pw") || !strings.Contains(got, "https://h.example/mcp") {
		t.Errorf("redactErr = %q", got)
	}
}

func TestNamesStayDistinct(t *testing.T) {
	f := newFixture(t, nil)
	turn := f.turn(t, nil, nil, nil)
	if got := wantOK(t, call(t, turn, "docs__list-repos", "")); got != `"answer from list-repos"` {
		t.Errorf("list-repos = %s", got)
	}
	if got := wantOK(t, call(t, turn, "docs__list_repos", "{}")); got != `"answer from list_repos"` {
		t.Errorf("list_repos = %s", got)
	}
	aliases := strings.Join(turn.Aliases(), " ")
	for _, n := range []string{"docs__list_repos", "docs__2fa", "docs__class"} {
		if !strings.Contains(" "+aliases+" ", " "+n+" ") {
			t.Errorf("%s has no alias", n)
		}
	}
	if strings.Contains(aliases, "list-repos") {
		t.Errorf("a hyphenated name got an alias: %s", aliases)
	}
	names := turn.Names()
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			t.Fatalf("Names not sorted: %q before %q", names[i-1], names[i])
		}
	}
	wantOK(t, call(t, turn, "docs__2fa", ""))
	wantOK(t, call(t, turn, "docs__class", ""))
	if !strings.Contains(f.logs.String(), "mockupstream: ready") || !strings.Contains(f.logs.String(), "server=docs") {
		t.Errorf("the server's stderr was not logged with its name:\n%s", f.logs)
	}
}

func TestValues(t *testing.T) {
	f := newFixture(t, nil)
	turn := f.turn(t, nil, nil, nil)
	var v map[string]any
	if err := json.Unmarshal([]byte(wantOK(t, call(t, turn, "docs__lookup", `{"sku":"A"}`))), &v); err != nil || v["sku"] != "A" {
		t.Errorf("lookup structured content = %v (%v)", v, err)
	}
	if got := wantOK(t, call(t, turn, "docs__add", `{"a":2,"b":3}`)); got != `{"sum":5}` {
		t.Errorf("add = %s", got)
	}
	r := call(t, turn, "docs__bytes", `{"n":100000}`)
	if got := wantOK(t, r); len(got) != 100002 || r.Size < 100000 {
		t.Errorf("bytes: value %d bytes, size %d", len(got), r.Size)
	}
}

func TestDeferredCatalogue(t *testing.T) {
	f := newFixture(t, nil)
	turn := f.turn(t, nil, nil, nil)
	cat := f.pool.Catalogue(context.Background())
	n := 0
	for _, tool := range cat.Bindable() {
		if strings.HasPrefix(tool.Name, "big__tool-") {
			n++
		}
	}
	if n != 351 {
		t.Fatalf("bindable big__tool-* = %d, want 351 (all pages)", n)
	}
	for _, tool := range cat.Exposed() {
		if tool.Server == "big" {
			t.Fatalf("deferred tool %s exposed", tool.Name)
		}
	}
	for _, tool := range turn.Exposed() {
		if tool.Server == "big" {
			t.Fatalf("deferred tool %s exposed by the turn", tool.Name)
		}
	}
	// Search finds it.
	page, err := turn.ListTools(ListToolsArgs{Query: "extra tool number 342"})
	if err != nil || len(page.Tools) != 1 || page.Tools[0].Name != "big__tool-0342" {
		t.Fatalf("search: %+v %v", page, err)
	}
	// Paging through list_tools sees every tool once. (The program's built-in, which encodes
	// these pages, is binding's; its tests call it.)
	seen := map[string]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		p, err := turn.ListTools(ListToolsArgs{Server: "big", Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range p.Tools {
			if seen[s.Name] {
				t.Fatalf("%s listed twice", s.Name)
			}
			seen[s.Name] = true
		}
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
		if pages > 20 {
			t.Fatal("list_tools never ends")
		}
	}
	if len(seen) != 351+len(cat.Exposed()) {
		t.Errorf("list_tools over big: %d tools, want %d", len(seen), 351+len(cat.Exposed()))
	}
	info, fe := turn.ToolInfo(t.Context(), "big__tool-0342")
	if fe != nil {
		t.Fatal(fe)
	}
	if info.Alias != nil || info.InputSchema == nil || !info.Deferred {
		t.Errorf("get_tool_info = %+v", info)
	}
	if got := wantOK(t, call(t, turn, "big__tool-0342", `{"q":"hi"}`)); got != `"tool-0342:hi"` {
		t.Errorf("deferred call = %s", got)
	}
}

func TestPolicy(t *testing.T) {
	f := newFixture(t, nil)
	turn := f.turn(t, []string{"docs__list*"}, []string{"docs__fail"}, nil)
	wantKind(t, call(t, turn, "docs__list_repos", ""), failure.Denied)
	wantKind(t, call(t, turn, "docs__list-repos", ""), failure.Denied)
	wantKind(t, call(t, turn, "docs__delete-everything", ""), failure.ApprovalRequiredInProgram)
	wantKind(t, call(t, turn, "docs__fail", ""), failure.ApprovalRequiredInProgram)
	wantKind(t, call(t, turn, "docs__nope", ""), failure.Unavailable)
	wantKind(t, call(t, turn, "other__x", ""), failure.Unavailable)
	// Built-in names (run_code, read_tool_output, print) are binding's: TestBuiltins there.
	for _, n := range turn.Names() {
		if strings.HasPrefix(n, "docs__list") {
			t.Errorf("denied %s in Names", n)
		}
	}
	if _, r := turn.ToolInfo(t.Context(), "docs__list_repos"); r == nil || r.Kind != failure.Denied {
		t.Errorf("get_tool_info of a denied tool: %+v", r)
	}
	if got := f.count(t, "delete-everything") + f.count(t, "fail") + f.count(t, "list_repos"); got != 0 {
		t.Fatalf("refused tools were called %d times", got)
	}
	// A host's direct call (not refused for approval) is binding's: TestDirect there.
	ctx := context.Background()
	// A server that is not granted is unavailable, not denied.
	t2 := f.pool.Catalogue(ctx).Resolve([]string{"big"}, nil, nil, nil)
	wantKind(t, call(t, t2, "docs__lookup", `{"sku":"A"}`), failure.Unavailable)
}

func TestBindings(t *testing.T) {
	f := newFixture(t, nil)
	b := []string{"docs__lookup", "docs__gone", "big__tool-00*", "nothing__*", "docs__list_repos"}
	turn := f.turn(t, []string{"docs__list_repos"}, nil, &b)
	if got, want := strings.Join(turn.Unavailable(), ","), "docs__gone,docs__list_repos,nothing__*"; got != want {
		t.Errorf("Unavailable = %s, want %s", got, want)
	}
	wantOK(t, call(t, turn, "docs__lookup", `{"sku":"A"}`))
	wantOK(t, call(t, turn, "big__tool-0042", ""))
	wantKind(t, call(t, turn, "big__tool-0142", ""), failure.Unavailable)
	wantKind(t, call(t, turn, "docs__gone", ""), failure.Unavailable)
	wantKind(t, call(t, turn, "docs__add", `{"a":1,"b":2}`), failure.Unavailable)
	if len(turn.Names()) != 1+99 {
		t.Errorf("Names = %d, want 100", len(turn.Names()))
	}
}

func TestToolError(t *testing.T) {
	f := newFixture(t, nil)
	r := call(t, f.turn(t, nil, nil, nil), "docs__fail", "")
	wantKind(t, r, failure.ToolError)
	if !strings.Contains(r.Message, "this tool always fails") || !r.Called {
		t.Errorf("tool_error reply = %+v", r)
	}
}

func TestInvalidArguments(t *testing.T) {
	f := newFixture(t, nil)
	turn := f.turn(t, nil, nil, nil)
	for _, args := range []string{`{"sku":5}`, `{}`, `[1]`, `{"sku":`, `"x"`} {
		wantKind(t, call(t, turn, "docs__lookup", args), failure.InvalidArguments)
	}
	// draft-07 with definitions and $ref.
	if got := wantOK(t, call(t, turn, "docs__legacy", `{"n":3}`)); got != `"legacy 3"` {
		t.Errorf("legacy = %s", got)
	}
	wantKind(t, call(t, turn, "docs__legacy", `{"n":-1}`), failure.InvalidArguments)
	wantKind(t, call(t, turn, "docs__legacy", `{"n":1,"x":1}`), failure.InvalidArguments)
	f.wantRuns(t, "lookup", 0) // never with invalid arguments
	f.wantRuns(t, "legacy", 1)
}

func TestCrashThenReconnect(t *testing.T) {
	f := newFixture(t, nil)
	turn := f.turn(t, nil, nil, nil)
	wantOK(t, call(t, turn, "docs__2fa", ""))
	wantKind(t, call(t, turn, "docs__crash", ""), failure.UpstreamError)
	// The next call reconnects; the failed one is not replayed.
	wantOK(t, call(t, f.turn(t, nil, nil, nil), "docs__2fa", ""))
	f.wantRuns(t, "crash", 1) // no replay
	f.wantRuns(t, "2fa", 2)
}

func TestListChanged(t *testing.T) {
	f := newFixture(t, nil)
	turn := f.turn(t, nil, nil, nil)
	wantKind(t, call(t, turn, "docs__fresh", ""), failure.Unavailable)
	wantOK(t, call(t, turn, "docs__change-tools", `{"name":"fresh"}`))
	select {
	case s := <-f.changed:
		if s != "docs" {
			t.Errorf("OnToolsChanged(%q)", s)
		}
	case <-time.After(gate.Scaled(10 * time.Second)):
		t.Fatal("no tools/list_changed")
	}
	deadline := time.Now().Add(gate.Scaled(10 * time.Second))
	for {
		next := f.turn(t, nil, nil, nil)
		if r := call(t, next, "docs__fresh", ""); r.Kind == "" {
			if string(r.Value) != `"hello from fresh"` {
				t.Errorf("fresh = %s", r.Value)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the new tool never appeared")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestConcurrentCalls(t *testing.T) {
	f := newFixture(t, nil)
	turn := f.turn(t, nil, nil, nil)
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sku := fmt.Sprintf("S%d", i)
			r := callCtx(context.Background(), turn, "docs__lookup", json.RawMessage(`{"sku":"`+sku+`"}`))
			if r.Kind != "" || !strings.Contains(string(r.Value), `"`+sku+`"`) {
				errs <- fmt.Sprintf("%s: %s %s %s", sku, r.Kind, r.Message, r.Value)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	f.wantRuns(t, "lookup", 64)
}

func TestTimeoutAndCancel(t *testing.T) {
	f := newFixture(t, func(s *Server) { s.CallTimeout = 300 * time.Millisecond })
	turn := f.turn(t, nil, nil, nil)
	start := time.Now()
	wantKind(t, call(t, turn, "docs__slow", `{"seconds":5}`), failure.Timeout)
	if d := time.Since(start); d > gate.Scaled(2*time.Second) {
		t.Errorf("timeout took %v", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	wantKind(t, callCtx(ctx, turn, "docs__slow", json.RawMessage(`{"seconds":0.25}`)), failure.Cancelled)
	// The session survives both.
	wantOK(t, call(t, turn, "docs__2fa", ""))
}

func TestServerValidate(t *testing.T) {
	bearer := func(context.Context) (string, error) { return "secret", nil }
	for _, c := range []struct {
		s  Server
		ok bool
	}{
		{Server{Name: "a", Command: []string{"x"}}, true},
		{Server{Name: "a", URL: "https://h/mcp", Bearer: bearer}, true},
		{Server{Name: "a", URL: "http://127.0.0.1:9/mcp", Bearer: bearer}, true},
		{Server{Name: "a", URL: "http://localhost:9/mcp", Bearer: bearer}, true},
		{Server{Name: "a", URL: "http://[::1]:9/mcp", Bearer: bearer}, true},
		{Server{Name: "a", URL: "http://h/mcp"}, true},
		{Server{Name: "a", URL: "http://h/mcp", Bearer: bearer}, false},
		{Server{Name: "a", URL: "http://h/mcp", Bearer: bearer, AllowInsecureHTTP: true}, true},
		{Server{Name: "a", URL: "https://u:p@h/mcp"}, false},
		{Server{Name: "a__b", Command: []string{"x"}}, false},
		{Server{Name: "A", Command: []string{"x"}}, false},
		{Server{Name: "a"}, false},
		{Server{Name: "a", Command: []string{"x"}, URL: "https://h"}, false},
		{Server{Name: "a", URL: "https://h", A2A: true, Bearer: bearer}, true},
		{Server{Name: "a", URL: "http://h", A2A: true, Bearer: bearer}, false},
		{Server{Name: "a", URL: "http://h", A2A: true, Bearer: bearer, AllowInsecureHTTP: true}, true},
		{Server{Name: "a", Command: []string{"x"}, A2A: true}, false},
		{Server{Name: "a", A2A: true}, false},
	} {
		err := c.s.Validate()
		if (err == nil) != c.ok {
			t.Errorf("%+v: Validate() = %v", c.s, err)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("credential in error: %v", err)
		}
	}
}

func TestUnreachableServer(t *testing.T) {
	p, err := NewPool(&PoolOptions{
		Servers: []Server{{Name: "dead", Command: []string{"/nonexistent/mcp-server"}}},
		Logger:  slog.New(slog.NewTextHandler(&testkit.Log{}, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cat := p.Catalogue(context.Background())
	if cat.Problems()["dead"] == "" {
		t.Fatalf("no problem reported: %v", cat.Problems())
	}
	wantKind(t, call(t, cat.Resolve([]string{"dead"}, nil, nil, nil), "dead__x", ""), failure.Unavailable)
}

func TestCloseIsBounded(t *testing.T) {
	f := newFixture(t, nil)
	turn := f.turn(t, nil, nil, nil)
	go callCtx(context.Background(), turn, "docs__slow", json.RawMessage(`{"seconds":30}`))
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	f.pool.Close()
	f.pool.Close()
	if d := time.Since(start); d > gate.Scaled(8*time.Second) {
		t.Errorf("Close took %v", d)
	}
	wantKind(t, call(t, turn, "docs__2fa", ""), failure.UpstreamError)
}

// TestCloseEndsServersCleanly: closing the pool closed the server's stdout before its stdin,
// so a server still writing as it was told to stop died of SIGPIPE, logged as a failure (a
// warning on every `mcp-sandbox run`). Now each server exits on its own at the end of stdin.
func TestCloseEndsServersCleanly(t *testing.T) {
	f := newFixture(t, nil)
	f.turn(t, nil, nil, nil)
	f.pool.Close()
	if strings.Contains(f.logs.String(), "upstream server exited") {
		t.Errorf("a server did not exit cleanly at Close:\n%s", f.logs)
	}
}

// A granted server that could not be started is reported to the model with its reason: in
// list_tools (a program's and the host's) and in the unavailable answer to a call of its
// tools, not only in the operator's log.
func TestFailedServerIsReportedWithItsReason(t *testing.T) {
	p, err := NewPool(&PoolOptions{
		Servers: []Server{
			{Name: "gone", Command: []string{"/nonexistent/mcp-server"}},
			{Name: "quits", Command: []string{"sh", "-c", "echo oops >&2; exit 3"}},
			{Name: "docs", Command: []string{mockBin}},
			{Name: "other", Command: []string{"/nonexistent/other"}},
		},
		Logger: slog.New(slog.NewTextHandler(&testkit.Log{}, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	turn := p.Catalogue(context.Background()).Resolve([]string{"gone", "quits", "docs"}, nil, nil, nil)
	want := map[string]string{"gone": "its command was not found", "quits": "it exited while starting"}
	page, err := turn.ListTools(ListToolsArgs{})
	if err != nil {
		t.Fatal(err)
	}
	got := page.Problems
	if len(got) != len(want) {
		t.Errorf("list_tools names unavailable servers %v, want exactly %v (granted ones only)", got, want)
	}
	for server, reason := range want {
		if !strings.Contains(got[server], reason) {
			t.Errorf("list_tools: %s: reason %q, want it to say %q", server, got[server], reason)
		}
		r := call(t, turn, server+"__anything", "{}")
		wantKind(t, r, failure.Unavailable)
		if !strings.Contains(r.Message, reason) {
			t.Errorf("calling a tool of %s: %q, want the reason %q", server, r.Message, reason)
		}
	}
	if len(page.Tools) == 0 {
		t.Errorf("the working server's tools are missing beside the failed ones")
	}
	if page, _ := turn.ListTools(ListToolsArgs{Server: "docs"}); len(page.Problems) != 0 {
		t.Errorf("list_tools for docs only names %v", page.Problems)
	}
	if got := turn.Problems(); len(got) != 2 || got["other"] != "" {
		t.Errorf("Problems() = %v, want the two granted failed servers", got)
	}
}
