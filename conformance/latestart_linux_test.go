package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// lateStart is how long the upstream below sleeps before npx starts it: what a first
// `npx -y` spends downloading a package on a cold cache (issue 37 saw Claude Code give up on
// tools/list meanwhile, and the upstream's trees left to init).
const lateStart = 40

// lateConfig is configs/examples/claude-desktop.yaml's shape (an npx upstream, its tools
// exposed) with the upstream started lateStart seconds late, from the installed npm peers
// (offline), tagged so that its processes can be found.
func lateConfig(t *testing.T, peers ecoPeers, tag string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "desktop.yaml")
	cfg := fmt.Sprintf(`data_dir: %[1]q
`+processProfile+`    hard_limits: {wall_seconds: 60}
upstreams:
  everything:
    command: ["sh", "-c", "sleep %[2]d && cd \"$0\" && exec npx -y @modelcontextprotocol/server-everything stdio", %[3]q]
    env: {LATE_UPSTREAM_TAG: %[4]q}
tenants:
  local:
    upstreams: [everything]
    agents:
      default:
        expose_upstream_tools: true
        code_execution: {profile: default}
`, filepath.Join(filepath.Dir(path), "data"), lateStart, peers.dir, tag)
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLateUpstreamNeverHoldsTheListing (issue 37, Must show 5): with an npx upstream that
// answers 40 s after it is started, tools/list answers at once with what is known, the
// upstream's tools follow with notifications/tools/list_changed when it is up, a program that
// calls one meanwhile waits for it, Claude Code's `mcp list` shows the server connected, and
// no process of the upstream outlives the session that started it, whether it was up (our
// client) or still starting (Claude Code leaves after its check).
func TestLateUpstreamNeverHoldsTheListing(t *testing.T) {
	peers := ecoNeedPeers(t)
	_, err := exec.LookPath("npx")
	gate.Require(t, "npm-peers", err == nil, "npx is not on PATH: "+fmtErr(err))
	claude := newOfflineClaude(t, filepath.Dir(peers.node))
	stamp := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	ours, theirs := "ours-"+stamp, "claude-"+stamp

	changed := make(chan struct{}, 8)
	cfg, err := os.ReadFile(lateConfig(t, peers, ours))
	if err != nil {
		t.Fatal(err)
	}
	cs, _, cmd, _ := serveWithProc(t, string(cfg), &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	start := time.Now()
	list, err := cs.ListTools(context.Background(), nil)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	t.Logf("tools/list answered in %v with the upstream starting", took)
	if took > gate.Scaled(time.Second) {
		t.Errorf("tools/list took %v: it waited for the upstream still starting", took)
	}
	for _, tool := range list.Tools {
		if strings.HasPrefix(tool.Name, "everything__") {
			t.Errorf("tools/list holds %s before the upstream answered", tool.Name)
		}
	}
	echoed := make(chan string, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(3*time.Minute))
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": `return await everything__echo(message="late")`}})
		if err != nil {
			echoed <- err.Error()
			return
		}
		b, _ := json.Marshal(res.StructuredContent)
		echoed <- string(b)
	}()

	// Claude Code, meanwhile: its check connects, lists the tools and leaves while the
	// upstream is still starting.
	claude.run(t, "", 0, nil, "mcp", "add", "sandbox", "--", built.sandbox, "serve", "--config", lateConfig(t, peers, theirs))
	out := claude.run(t, "", 0, nil, "mcp", "list")
	t.Logf("claude mcp list:\n%s", out)
	if !connected(out, "sandbox") {
		t.Errorf("claude mcp list does not show the server connected with its tools:\n%s", out)
	}
	noneTagged(t, "the upstream of the server Claude Code checked", "LATE_UPSTREAM_TAG", theirs)

	select {
	case <-changed:
		t.Logf("tools/list_changed %v after the first listing", time.Since(start))
	case <-time.After(gate.Scaled(3 * time.Minute)):
		t.Fatal("no tools/list_changed after the upstream came up")
	}
	if !hostTools(t, cs)["everything__echo"] {
		t.Error("after tools/list_changed the upstream's tools are not listed")
	}
	select {
	case b := <-echoed:
		if !strings.Contains(b, "late") || strings.Contains(b, `"failure":{`) {
			t.Errorf("a program calling the upstream while it started got %s", b)
		}
	case <-time.After(gate.Scaled(3 * time.Minute)):
		t.Fatal("the program calling the upstream did not end")
	}
	cs.Close()
	_ = cmd.Wait()
	noneTagged(t, "the upstream of our session", "LATE_UPSTREAM_TAG", ours)
}
