//go:build linux

package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/namespaces"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/remote"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/remote/service"
	"github.com/mcp-sandbox/mcp-sandbox/engine/sandboxtest"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
)

// The service runs in this test binary, so a hostile program's processes live in the pid
// namespace gate.Main made, and the contract suite's scan of /proc for survivors sees them.
func TestMain(m *testing.M) { sandboxtest.Main(m) }

// serveOn serves h on a fresh loopback listener until t ends, and returns its base URL.
func serveOn(t testing.TB, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(10*time.Second))
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			srv.Close()
		}
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

const testToken = "remote-contract-token"

// namespacesService is a sandbox service over the namespaces backend with hard limits
// ceiling, on loopback, accepting testToken.
func namespacesService(t *testing.T, ceiling engine.Limits) (url string, runner *engine.Runner) {
	t.Helper()
	ok, reason := namespaces.Available(&namespaces.Options{})
	gate.Require(t, "namespaces", ok, reason)
	b, err := namespaces.New(context.Background(), &namespaces.Options{})
	runner = sandboxtest.Runner(t, b, err, &engine.RunnerOptions{Ceiling: ceiling, Isolation: engine.LevelIsolated,
		Artifacts: engine.ArtifactPolicy{Collect: true}})
	svc := service.New(&service.Options{Sandbox: runner, Authenticate: func(tok string) (string, bool) {
		return "caller", tok == testToken
	}})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(10*time.Second))
		defer cancel()
		svc.Drain(ctx)
	})
	return serveOn(t, svc), runner
}

func client(t testing.TB, url string, ceiling engine.Limits, level engine.Level) *remote.Sandbox {
	t.Helper()
	sb, err := remote.New(&remote.Options{URL: url, Ceiling: ceiling, Isolation: level,
		Bearer:    func(context.Context) (string, error) { return testToken, nil },
		Artifacts: engine.ArtifactPolicy{Collect: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

// Must show 1: the contract suite, unchanged, over remote → sandbox service → namespaces on
// loopback, hostile programs included.
func TestContract(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Config{
		Level: engine.LevelIsolated,
		New: func(t *testing.T, ceiling engine.Limits) engine.Sandbox {
			url, _ := namespacesService(t, ceiling)
			return client(t, url, ceiling, engine.LevelIsolated)
		},
	})
}

// Binding calls from a real child travel back through the service to the caller's
// ToolCaller, overlapping, with refusals as ToolError kinds and handles paged by reads.
func TestBindingCallsTravelBack(t *testing.T) {
	url, _ := namespacesService(t, engine.DefaultLimits)
	sb := client(t, url, engine.DefaultLimits, engine.LevelIsolated)
	tools := &callerTools{}
	res := sb.Run(context.Background(), engine.Execution{Program: `import asyncio
sums = await asyncio.gather(*[up__add(a=i, b=1) for i in range(12)])
try:
    await call_tool("up__denied", {})
    denied = None
except ToolError as e:
    denied = [e.kind, e.tool]
big = await up__big()
window = await big.read(offset=2, limit=3)
return {"sums": [s["sum"] for s in sums], "denied": denied, "window": window}`,
		Terms: engine.Terms{Isolation: engine.LevelIsolated}, Tools: tools,
		ToolNames: []string{"up__add", "up__big", "up__denied"}, Aliases: []string{"up__add", "up__big", "up__denied"}})
	if res.Failure != nil {
		t.Fatalf("%s: %s\n%s", res.Failure.Kind, res.Failure.Message, res.Failure.Traceback)
	}
	var v struct {
		Sums   []int    `json:"sums"`
		Denied []string `json:"denied"`
		Window string   `json:"window"`
	}
	if err := json.Unmarshal(res.Value, &v); err != nil {
		t.Fatalf("value %s: %v", res.Value, err)
	}
	for i, s := range v.Sums {
		if s != i+1 {
			t.Errorf("sum %d = %d", i, s)
		}
	}
	if len(v.Sums) != 12 || strings.Join(v.Denied, ",") != "denied,up__denied" || v.Window != "h_big 2 3" {
		t.Errorf("value %s", res.Value)
	}
	if tools.calls.Load() != 14 || tools.reads.Load() != 1 {
		t.Errorf("the caller saw %d calls and %d reads, want 14 and 1", tools.calls.Load(), tools.reads.Load())
	}
}

// callerTools stands for the caller's policy: up__add answers, up__denied is refused, up__big
// is too large and comes back as a handle.
type callerTools struct{ calls, reads atomic.Int32 }

func (c *callerTools) CallTool(_ context.Context, name string, args json.RawMessage) toolcall.Answer {
	c.calls.Add(1)
	switch name {
	case "up__add":
		var in struct{ A, B int }
		_ = json.Unmarshal(args, &in)
		return toolcall.Answer{Value: json.RawMessage(fmt.Sprintf(`{"sum":%d}`, in.A+in.B))}
	case "up__big":
		return toolcall.Answer{Handle: &toolcall.Handle{ID: "h_big", Size: 1 << 30, Lines: 1000}}
	}
	return toolcall.Answer{Kind: failure.Denied, Message: "the policy denies " + name}
}

func (c *callerTools) ReadHandle(_ context.Context, handle string, offset, limit int, _ string) toolcall.Answer {
	c.reads.Add(1)
	return toolcall.Answer{Value: json.RawMessage(fmt.Sprintf(`"%s %d %d"`, handle, offset, limit))}
}
