package binding

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

// fixture is a go-sdk server "up" over streamable HTTP on loopback, reached through a Pool,
// that counts the calls each of its tools really received.
type fixture struct {
	pool *upstream.Pool

	mu             sync.Mutex
	counts         map[string]int
	inFlight, peak atomic.Int32
}

type echoIn struct {
	S string `json:"s"`
}

type slowIn struct {
	Seconds float64 `json:"seconds"`
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{counts: map[string]int{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	echo := func(name string) mcp.ToolHandlerFor[echoIn, any] {
		return func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			f.count(name)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo " + in.S}}}, nil, nil
		}
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echoes."}, echo("echo"))
	mcp.AddTool(srv, &mcp.Tool{Name: "add", Description: "Echoes too."}, echo("add"))
	mcp.AddTool(srv, &mcp.Tool{Name: "secret", Description: "Denied by policy."}, echo("secret"))
	mcp.AddTool(srv, &mcp.Tool{Name: "wipe", Description: "Destructive.", Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true)}}, echo("wipe"))
	// pay takes any keys beside its declared amount, to and pin (a writeOnly secret): its schema
	// says so (additionalProperties), else its binding would refuse them as invalid_arguments.
	srv.AddTool(&mcp.Tool{Name: "pay", Description: "Pays.", Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true)},
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{
			"amount": map[string]any{"type": "number"}, "to": map[string]any{"type": "string"},
			"pin": map[string]any{"type": "string", "writeOnly": true}},
			"additionalProperties": true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			f.count("pay")
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "paid"}}}, nil
		})
	// deep answers a structured value nested n objects deep.
	srv.AddTool(&mcp.Tool{Name: "deep", Description: "Nests.", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct{ N int }
			_ = json.Unmarshal(req.Params.Arguments, &in)
			v := json.RawMessage(strings.Repeat(`{"a":`, in.N) + "1" + strings.Repeat("}", in.N))
			return &mcp.CallToolResult{StructuredContent: v, Content: []mcp.Content{&mcp.TextContent{Text: "deep"}}}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "slow", Description: "Sleeps."}, func(ctx context.Context, _ *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, any, error) {
		n := f.inFlight.Add(1)
		defer f.inFlight.Add(-1)
		for p := f.peak.Load(); n > p && !f.peak.CompareAndSwap(p, n); p = f.peak.Load() {
		}
		select {
		case <-time.After(time.Duration(in.Seconds * float64(time.Second))):
		case <-ctx.Done():
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slept"}}}, nil, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	pool, err := upstream.NewPool(&upstream.PoolOptions{Servers: []upstream.Server{{Name: "up", URL: ts.URL}}, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	f.pool = pool
	return f
}

func ptr[T any](v T) *T { return &v }

func (f *fixture) count(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts[name]++
}

func (f *fixture) calls(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[name]
}

func (f *fixture) turn(t *testing.T) *upstream.Turn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(30*time.Second))
	defer cancel()
	cat := f.pool.Catalogue(ctx)
	if len(cat.Problems()) > 0 {
		t.Fatalf("catalogue problems: %v", cat.Problems())
	}
	return cat.Resolve([]string{"up"}, []string{"up__secret"}, nil, nil)
}

func callOf(t *testing.T, x *Execution, name, args string) toolcall.Answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(30*time.Second))
	defer cancel()
	return x.CallTool(ctx, name, json.RawMessage(args))
}

func wantKind(t *testing.T, r toolcall.Answer, k failure.Kind) {
	t.Helper()
	if r.Kind != k || r.Message == "" {
		t.Fatalf("reply %+v (%s), want kind %q with a message", r, r.Value, k)
	}
}

// TestBuiltins: the names that are not upstream tools are served or refused before the policy.
func TestBuiltins(t *testing.T) {
	f := newFixture(t)
	x := New(&Options{Turn: f.turn(t)})
	var page upstream.ListToolsPage
	if r := callOf(t, x, "list_tools", `{"query":"echoes"}`); r.Kind != "" || json.Unmarshal(r.Value, &page) != nil || len(page.Tools) != 2 {
		t.Errorf("list_tools = %+v %s", r, r.Value)
	}
	var info upstream.ToolInfo
	if r := callOf(t, x, "get_tool_info", `{"name":"up__echo"}`); r.Kind != "" || json.Unmarshal(r.Value, &info) != nil || info.Alias == nil || *info.Alias != "up__echo" {
		t.Errorf("get_tool_info = %+v %s", r, r.Value)
	}
	wantKind(t, callOf(t, x, "get_tool_info", `{"name":"up__secret"}`), failure.Denied)
	wantKind(t, callOf(t, x, "list_tools", `{"bogus":1}`), failure.InvalidArguments)
	wantKind(t, callOf(t, x, "run_code", `{"code":"1"}`), failure.ExcludedBuiltin)
	// read_tool_output is served, for this execution's own handles only.
	wantKind(t, callOf(t, x, "read_tool_output", `{}`), failure.Unavailable)
	wantKind(t, callOf(t, x, "print", `{}`), failure.Unavailable)
}

// TestPolicyOrder: deny, bindings, arguments and approval (nobody to ask here) refuse before
// the upstream is touched.
func TestPolicyOrder(t *testing.T) {
	f := newFixture(t)
	cat := f.pool.Catalogue(context.Background())
	bindings := []string{"up__echo", "up__wipe", "up__secret"}
	x := New(&Options{Turn: cat.Resolve([]string{"up"}, []string{"up__secret"}, nil, &bindings)})
	if got := strings.Join(x.Names(), ","); got != "up__echo,up__wipe" {
		t.Errorf("Names = %s", got)
	}
	if got := strings.Join(x.Unavailable(), ","); got != "up__secret" {
		t.Errorf("Unavailable = %s", got)
	}
	if r := callOf(t, x, "up__echo", `{"s":"a"}`); r.Kind != "" || string(r.Value) != `"echo a"` {
		t.Errorf("echo = %+v %s", r, r.Value)
	}
	wantKind(t, callOf(t, x, "up__secret", `{}`), failure.Denied)
	wantKind(t, callOf(t, x, "up__add", `{}`), failure.Unavailable)
	wantKind(t, callOf(t, x, "up__wipe", `{"s":"x"}`), failure.ApprovalRequiredInProgram)
	wantKind(t, callOf(t, x, "up__echo", `{"s":1}`), failure.InvalidArguments)
	wantKind(t, callOf(t, x, "down__echo", `{}`), failure.Unavailable)
	if n := f.calls("secret") + f.calls("add") + f.calls("wipe"); n != 0 {
		t.Errorf("refused tools were called %d times", n)
	}
}

// TestDirect: a host's direct call is not narrowed by bindings, but the deny policy holds.
func TestDirect(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	bindings := []string{}
	turn := f.pool.Catalogue(ctx).Resolve([]string{"up"}, []string{"up__secret"}, nil, &bindings)
	if r := Direct(ctx, turn, nil, nil, discard(), "up__echo", json.RawMessage(`{"s":"x"}`)); r.Kind != "" {
		t.Errorf("direct echo = %+v", r)
	}
	wantKind(t, Direct(ctx, turn, nil, nil, discard(), "up__secret", nil), failure.Denied)
	if got := f.calls("echo"); got != 1 {
		t.Errorf("direct call count = %d, want 1", got)
	}
}

// TestAdmissionAfterValidation: a call refused by the meter never reaches the upstream, and
// one with invalid arguments never reaches the meter (it would be budget_exceeded otherwise).
func TestAdmissionAfterValidation(t *testing.T) {
	f := newFixture(t)
	x := newExecution(t, budget.Limits{MaxCalls: 1})
	x.turn = f.turn(t)
	if r := callOf(t, x, "up__echo", `{"s":"A"}`); r.Kind != "" {
		t.Fatalf("echo = %+v", r)
	}
	wantKind(t, callOf(t, x, "up__add", `{"s":"b"}`), failure.BudgetExceeded)
	wantKind(t, callOf(t, x, "up__echo", `{"s":2}`), failure.InvalidArguments)
	if got := f.calls("add"); got != 0 {
		t.Errorf("add really called %d times", got)
	}
	x.Wait()
}

// TestCallSlots: at most MaxConcurrentCalls of an execution's calls are in flight at once.
func TestCallSlots(t *testing.T) {
	f := newFixture(t)
	x := New(&Options{Turn: f.turn(t), MaxConcurrentCalls: 3})
	var wg sync.WaitGroup
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := x.CallTool(context.Background(), "up__slow", json.RawMessage(`{"seconds":0.05}`)); r.Kind != "" {
				t.Errorf("slow: %s %s", r.Kind, r.Message)
			}
		}()
	}
	wg.Wait()
	if p := f.peak.Load(); p > 3 || p < 2 {
		t.Errorf("peak concurrency %d, want 2..3", p)
	}
	// A call that cannot get a slot before its context ends is not made.
	for range 3 {
		x.slots <- struct{}{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	wantKind(t, x.CallTool(ctx, "up__slow", json.RawMessage(`{"seconds":0}`)), failure.Timeout)
}

// TestDeepResultRefused: a result nested 5,000 deep (past the go-sdk's decoder), or 600
// (past what a program's JSON decoder is handed: it would wait for the answer until its wall
// clock), is refused as invalid_result at once, recorded failed; one at the bound crosses.
func TestDeepResultRefused(t *testing.T) {
	f := newFixture(t)
	x, led, _ := approvalSetup(t, f, nil, nil)
	for n, says := range map[int]string{5000: "nests deeper than the 1000 levels", 600: "nests 600 levels deep, more than the 256"} {
		r := x.CallTool(context.Background(), "up__deep", json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)))
		wantKind(t, r, failure.InvalidResult)
		if !strings.Contains(r.Message, says) {
			t.Errorf("%d deep: message %q", n, r.Message)
		}
	}
	if r := x.CallTool(context.Background(), "up__deep", json.RawMessage(fmt.Sprintf(`{"n":%d}`, maxResultDepth))); r.Kind != "" {
		t.Errorf("a result %d deep: %+v", maxResultDepth, r)
	}
	x.Wait()
	calls, err := led.Calls(context.Background(), budget.RunRef{Tenant: "t", ID: "r"})
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, c := range calls {
		if c.Status == budget.Failed && c.Kind == string(failure.InvalidResult) {
			failed++
		}
	}
	if len(calls) != 3 || failed != 2 {
		t.Errorf("ledger: %+v", calls)
	}
}

// TestKeywordsCheckedAndRecorded: a program's call with a keyword its binding does not take,
// or without a required one, is refused invalid_arguments naming it before the upstream is
// reached (the program's own check can be skipped by a hostile program; this one cannot), and
// recorded as a refused call.
func TestKeywordsCheckedAndRecorded(t *testing.T) {
	f := newFixture(t)
	x, led := newExecutionLedger(t, budget.Limits{MaxCalls: 10})
	x.turn = f.turn(t)
	r := callOf(t, x, "up__echo", `{"ss":"a"}`)
	wantKind(t, r, failure.InvalidArguments)
	if !strings.Contains(r.Message, `"ss"`) || !strings.Contains(r.Message, `did you mean "s"`) {
		t.Errorf("message %q does not name the argument and the near one", r.Message)
	}
	if n := f.calls("echo"); n != 0 {
		t.Errorf("echo really called %d times", n)
	}
	if r := callOf(t, x, "up__echo", `{"s":"a"}`); r.Kind != "" {
		t.Fatalf("echo = %+v", r)
	}
	x.Wait()
	calls, err := led.Calls(context.Background(), budget.RunRef{Tenant: "t", ID: "r"})
	if err != nil {
		t.Fatal(err)
	}
	var refused, spent int
	for _, c := range calls {
		if c.Status == budget.Refused && c.Kind == string(failure.InvalidArguments) && c.Tool == "up__echo" {
			refused++
		}
		if c.Spent {
			spent++
		}
	}
	if refused != 1 || spent != 1 {
		t.Errorf("ledger holds %d invalid_arguments refusals and %d spent calls, want 1 and 1: %+v", refused, spent, calls)
	}
}
