package conformance

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestReloadWithdrawsATool: a policy change delivered by SIGHUP takes effect at the next turn:
// the withdrawn tool is neither listed nor callable from a program, and the host is told its
// tool list changed.
func TestReloadWithdrawsATool(t *testing.T) {
	cfg, _ := mockConfig(t)
	var listChanged atomic.Int32
	cs, _, cmd, path := serveWithProc(t, cfg, &mcp.ClientOptions{
		ToolListChangedHandler: func(_ context.Context, _ *mcp.ToolListChangedRequest) { listChanged.Add(1) },
	})
	if !hostTools(t, cs)["support__lookup"] {
		t.Fatal("support__lookup is not exposed before the reload")
	}
	r := run(t, cs, "await support__lookup(sku='A1')", nil)
	if r.Failure != nil {
		t.Fatalf("before the reload: %+v", r.Failure)
	}
	before := listChanged.Load()

	withdrawn := strings.Replace(cfg, `deny: ["support__class"]`, `deny: ["support__class", "support__lookup"]`, 1)
	if err := os.WriteFile(path, []byte(withdrawn), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for hostTools(t, cs)["support__lookup"] {
		if time.Now().After(deadline) {
			t.Fatal("support__lookup is still listed 10 s after the reload")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var kind string
	r = run(t, cs, "assert 'support__lookup' not in TOOLS\ntry:\n    await call_tool('support__lookup', {'sku': 'A1'})\nexcept ToolError as e:\n    return e.kind", &kind)
	if r.Failure != nil || kind != "denied" {
		t.Fatalf("a program calling the withdrawn tool: kind %q, failure %+v", kind, r.Failure)
	}
	for listChanged.Load() == before {
		if time.Now().After(deadline) {
			t.Fatal("the host was not told its tool list changed")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
