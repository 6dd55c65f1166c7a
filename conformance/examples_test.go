//go:build linux

package conformance

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/container"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/pgdb/pgtest"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

// examplesPGDSN is the variable the examples that keep state on PostgreSQL read the DSN from.
const examplesPGDSN = "MCP_SANDBOX_PG_DSN"

// examplesStateKey is the variable the examples read approvals.state_key from; the tests give
// it a key of their own (32 bytes, base64), as an operator gives every replica theirs.
const examplesStateKey = "MCP_SANDBOX_STATE_KEY"

// The loopback addresses the examples give what their comments say to start first: a
// streamable HTTP upstream (server-everything), and the sandbox service of
// sandbox-service.yaml that remote.yaml's profile reaches.
const (
	examplesHTTPUpstream = "127.0.0.1:3001"
	examplesA2AAgent     = "127.0.0.1:3002"
	examplesService      = "127.0.0.1:8443"
)

// TestExamplesRunAsShipped starts every file of configs/examples, as a user who follows its
// comments would: a sandbox service's config under `sandbox-service`, every other under
// `serve`. /readyz answers 200; every agent of every tenant lists the tools of each upstream
// its tenant is granted, none unavailable, and runs a program where it may. The only change
// is the addresses of what the examples' comments say to start first (server-everything over
// streamable HTTP, this repository's sample A2A agent, the sandbox service), moved to free
// ports so that tests running at once do not collide. The stdio upstreams start through npx
// as written, which finds the pinned npm peers from conformance/ without the network.
func TestExamplesRunAsShipped(t *testing.T) {
	peers := ecoNeedPeers(t)
	_, err := exec.LookPath("npx")
	gate.Require(t, "npm-peers", err == nil, "npx is not on PATH: the examples start their stdio upstreams with it")

	upstreamPort, servicePort := fmt.Sprint(freeLoopbackPort(t)), fmt.Sprint(freeLoopbackPort(t))
	agent := a2aAgent(t)
	dir := t.TempDir()
	copyExamples(t, filepath.Join("..", "configs", "examples"), dir, strings.NewReplacer(
		examplesHTTPUpstream, "127.0.0.1:"+upstreamPort, examplesService, "127.0.0.1:"+servicePort,
		"http://"+examplesA2AAgent, agent.url))
	home := t.TempDir()
	env := append(peers.env(), "HOME="+home, "XDG_STATE_HOME="+filepath.Join(home, "state"),
		"DOCS_TOKEN=example-token", "SEARCH_TOKEN=example-token", "SANDBOX_TOKEN=example-token", "PLANNER_TOKEN=example-token")
	startEverythingHTTP(t, peers, upstreamPort)

	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) < 3 {
		t.Fatalf("found %d examples", len(files))
	}
	var services, servers []string
	for _, f := range files {
		cfg, err := configs.Load(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if cfg.SandboxService != nil && len(cfg.Tenants) == 0 {
			services = append(services, f)
		} else {
			servers = append(servers, f)
		}
	}
	// Services first, for as long as the whole test: the remote example's profile is not ready
	// without one.
	for _, f := range services {
		base := ecoStartIn(t, peers.dir, env, "sandbox-service", "--listen", "127.0.0.1:"+servicePort, "--config", f)
		t.Run(filepath.Base(f), func(t *testing.T) {
			if !waitUntil(90*time.Second, func() bool { return statusOf(base+"/readyz") == http.StatusOK }) {
				t.Fatalf("/readyz answered %d, want 200", statusOf(base+"/readyz"))
			}
		})
	}
	for _, f := range servers {
		t.Run(filepath.Base(f), func(t *testing.T) {
			cfg, _ := configs.Load(f)
			for _, p := range cfg.Profiles {
				if p.Backend == configs.BackendContainer {
					d := container.Detect(context.Background(), nil)
					gate.Require(t, "container", d.Available, d.Reason)
				}
			}
			env := env
			if text, _ := os.ReadFile(f); strings.Contains(string(text), examplesPGDSN) {
				// State on PostgreSQL: the example's DSN variable names a schema of this test's.
				env = append(slices.Clone(env), examplesPGDSN+"="+pgtest.Schema(t))
			}
			if text, _ := os.ReadFile(f); strings.Contains(string(text), examplesStateKey) {
				key := make([]byte, 32)
				if _, err := rand.Read(key); err != nil {
					t.Fatal(err)
				}
				env = append(slices.Clone(env), examplesStateKey+"="+base64.StdEncoding.EncodeToString(key))
			}
			base := ecoStartHTTPIn(t, f, peers.dir, env)
			if !waitUntil(90*time.Second, func() bool { return statusOf(base+"/readyz") == http.StatusOK }) {
				t.Fatalf("/readyz answered %d, want 200", statusOf(base+"/readyz"))
			}
			for _, tn := range slices.Sorted(maps.Keys(cfg.Tenants)) {
				tenant := cfg.Tenants[tn]
				for _, an := range slices.Sorted(maps.Keys(tenant.Agents)) {
					runs := tenant.Agents[an].CodeExecution != nil
					t.Run(tn+"/"+an, func(t *testing.T) { exampleAgent(t, f, peers.dir, env, tn, an, tenant.Upstreams, runs) })
				}
			}
		})
	}
}

// exampleAgent serves one agent over stdio and requires list_tools to name a tool of each
// granted upstream and no unavailable server, and, for an agent that may run code, a program
// to complete.
func exampleAgent(t *testing.T, config, dir string, env []string, tenant, agent string, granted []string, runs bool) {
	cmd := exec.Command(built.sandbox, "serve", "--config", config, "--tenant", tenant, "--agent", agent)
	cmd.Dir, cmd.Env, cmd.Stderr = dir, env, testkit.NewLog(t, "server")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "examples", Version: "0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_tools", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("list_tools: %v %s", err, testkit.Text(res))
	}
	var page upstream.ListToolsPage
	b, err := structured(res, &page)
	if err != nil {
		t.Fatalf("list_tools %s: %v", b, err)
	}
	for server, p := range page.Problems {
		// A note on skipped tools is the server's business (the sample A2A agent has skills
		// named against the rules on purpose); a server that could not be started is not.
		if strings.Contains(p, "is unavailable:") {
			t.Errorf("upstream server %s: %s", server, p)
		}
	}
	servers := map[string]bool{}
	for _, tl := range page.Tools {
		servers[tl.Server] = true
	}
	for _, u := range granted {
		if !servers[u] {
			t.Errorf("list_tools names no tool of the granted upstream %s:\n%s", u, testkit.Text(res))
		}
	}
	if runs {
		var v int
		run(t, cs, "print('hi'); 6*7", &v)
		if v != 42 {
			t.Errorf("a program's value is %d, want 42", v)
		}
	}
}

// copyExamples copies the examples tree from src into dst, moving addresses with r.
func copyExamples(t *testing.T, src, dst string, r *strings.Replacer) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), []byte(r.Replace(string(b))), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// startEverythingHTTP runs server-everything over streamable HTTP on port until t ends.
func startEverythingHTTP(t *testing.T, peers ecoPeers, port string) {
	t.Helper()
	entry := filepath.Join(peers.dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	cmd := exec.Command(peers.node, entry, "streamableHttp")
	cmd.Dir, cmd.Env, cmd.Stderr = peers.dir, append(peers.env(), "PORT="+port), testkit.NewLog(t, "server")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if !waitUntil(60*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	}) {
		t.Fatal("server-everything did not listen within 60s")
	}
}

func statusOf(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func waitUntil(d time.Duration, ok func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if ok() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
}
