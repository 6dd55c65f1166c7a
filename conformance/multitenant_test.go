//go:build linux

package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// exampleToken is the secret configs/examples/multi-tenant.yaml gives, in a comment, for
// acme's first token (configs' TestExampleTokensAreGiven checks the comment against the hash).
const exampleToken = "acme-example-token-1"

// TestMultiTenantExampleAsShipped serves configs/examples/multi-tenant.yaml as its comments
// and the README say (its upstreams started first, at free ports), and: a real MCP client with
// the example token runs run_code on acme's analyst, every granted upstream reachable; the
// README's curl request does the same; /mcp (acme has no default agent) and an unknown agent
// answer JSON naming what is missing. Served again without DOCS_TOKEN, the model is told that
// DOCS_TOKEN is not set.
func TestMultiTenantExampleAsShipped(t *testing.T) {
	peers := ecoNeedPeers(t)
	_, err := exec.LookPath("npx")
	gate.Require(t, "npm-peers", err == nil, "npx is not on PATH: the example starts its stdio upstreams with it")
	upstreamPort := fmt.Sprint(freeLoopbackPort(t))
	agent := a2aAgent(t)
	dir := t.TempDir()
	copyExamples(t, filepath.Join("..", "configs", "examples"), dir, strings.NewReplacer(
		examplesHTTPUpstream, "127.0.0.1:"+upstreamPort, "http://"+examplesA2AAgent, agent.url))
	startEverythingHTTP(t, peers, upstreamPort)
	cfg := filepath.Join(dir, "multi-tenant.yaml")
	home := t.TempDir()
	env := append(peers.env(), "HOME="+home, "XDG_STATE_HOME="+filepath.Join(home, "state"), "PLANNER_TOKEN=any-value")

	base := ecoStartHTTPIn(t, cfg, peers.dir, append(slices.Clone(env), "DOCS_TOKEN=any-value"))
	if !waitUntil(90*time.Second, func() bool { return statusOf(base+"/readyz") == http.StatusOK }) {
		t.Fatalf("/readyz answered %d, want 200", statusOf(base+"/readyz"))
	}

	t.Run("client", func(t *testing.T) {
		cs := httpSession(t, base+"/mcp/analyst", exampleToken)
		var full struct {
			Problems []struct{ Server, Problem string } `json:"upstream_problems"`
		}
		var v int
		runInto(t, cs, "", "print(sorted({n.split('__')[0] for n in TOOLS}))\nreturn 6*7", &v, &full)
		if v != 42 {
			t.Errorf("value %d, want 42", v)
		}
		for _, p := range full.Problems {
			// The sample A2A agent has skills named against the rules on purpose (a note of
			// what was skipped); a server that could not be reached is the failure.
			if strings.Contains(p.Problem, "is unavailable:") {
				t.Errorf("upstream %s: %s", p.Server, p.Problem)
			}
		}
	})

	t.Run("readme curl", func(t *testing.T) {
		// The request of the README and of the example's comment, byte for byte but the host.
		body := `{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "run_code",
       "arguments": {"code": "6*7"}, "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
       "io.modelcontextprotocol/clientCapabilities": {},
       "io.modelcontextprotocol/clientInfo": {"name": "curl", "version": "0"}}}}`
		req, _ := http.NewRequest("POST", base+"/mcp/analyst", strings.NewReader(body))
		for k, v := range map[string]string{"Authorization": "Bearer " + exampleToken, "Content-Type": "application/json",
			"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
			"Mcp-Method": "tools/call", "Mcp-Name": "run_code"} {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Contains(got, []byte(`"value":42`)) {
			t.Errorf("status %d:\n%s", resp.StatusCode, got)
		}
	})

	t.Run("missing agents", func(t *testing.T) {
		for path, want := range map[string]string{
			"/mcp":            `"error":"no_default_agent"`,
			"/mcp/nosuch":     `"error":"unknown_agent"`,
			"/mcp/helpdesk_x": `"agent":"helpdesk_x"`,
		} {
			req, _ := http.NewRequest("POST", base+path, strings.NewReader(`{}`))
			req.Header.Set("Authorization", "Bearer "+exampleToken)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var problem struct {
				Message string   `json:"message"`
				Agents  []string `json:"agents"`
			}
			if resp.StatusCode != 404 || resp.Header.Get("Content-Type") != "application/json" ||
				!strings.Contains(string(got), want) || json.Unmarshal(got, &problem) != nil ||
				!slices.Equal(problem.Agents, []string{"analyst", "helpdesk"}) {
				t.Errorf("%s: %d %s\n%s", path, resp.StatusCode, resp.Header.Get("Content-Type"), got)
			}
		}
	})

	t.Run("credential not set", func(t *testing.T) {
		base := ecoStartHTTPIn(t, cfg, peers.dir, env) // no DOCS_TOKEN
		if !waitUntil(90*time.Second, func() bool { return statusOf(base+"/readyz") == http.StatusOK }) {
			t.Fatalf("/readyz answered %d, want 200", statusOf(base+"/readyz"))
		}
		cs := httpSession(t, base+"/mcp/analyst", exampleToken)
		var full struct {
			Problems []struct{ Server, Problem string } `json:"upstream_problems"`
		}
		runInto(t, cs, "", "6*7", nil, &full)
		re := regexp.MustCompile(`DOCS_TOKEN is not set`)
		var said bool
		for _, p := range full.Problems {
			said = said || p.Server == "docs" && re.MatchString(p.Problem)
		}
		if !said {
			t.Errorf("upstream_problems %+v do not tell the model DOCS_TOKEN is not set", full.Problems)
		}
	})
}
