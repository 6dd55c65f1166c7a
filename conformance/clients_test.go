package conformance

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// ecoToken is the test-only bearer token whose sha256 is in testdata/clients.yaml.
const ecoToken = "eco-conformance-token"

// ecoClientReport is what every client prints: the tools it listed and run_code's result.
type ecoClientReport struct {
	Protocol   string          `json:"protocol"`
	Tools      []string        `json:"tools"`
	IsError    bool            `json:"is_error"`
	Text       string          `json:"text"`
	Structured json.RawMessage `json:"structured"`
	// Report is run_code's _meta "mcp-sandbox/report", where a client passes it on.
	Report json.RawMessage `json:"report,omitempty"`
}

// TestRealClients: the Inspector CLI, a TypeScript SDK script and an mcp-go client each list
// the tools and get value 42 from run_code with 6*7, over stdio and over HTTP with a token.
func TestRealClients(t *testing.T) {
	p := ecoNeedPeers(t)
	bin := testkit.Binary(t)
	cfg, err := filepath.Abs("testdata/clients.yaml")
	if err != nil {
		t.Fatal(err)
	}
	url := ecoStartHTTP(t, cfg) + "/mcp"
	stdio := []string{bin, "serve", "--config", cfg}
	mcpgo := ecoBuildMCPGoClient(t)

	// tsClient runs clients/ts-client.mjs on the TypeScript SDK of version sdk.
	tsClient := func(sdk string) func(t *testing.T, http bool) ecoClientReport {
		return func(t *testing.T, http bool) ecoClientReport {
			args := append([]string{"clients/ts-client.mjs", "--sdk", sdk, "--"}, stdio...)
			if http {
				args = []string{"clients/ts-client.mjs", "--sdk", sdk, "--url", url, "--token", ecoToken}
			}
			out, err := ecoRun(t, time.Minute, p.dir, p.env(), p.node, args...)
			if err != nil {
				t.Fatalf("ts-client --sdk %s: %v", sdk, err)
			}
			var r ecoClientReport
			ecoDecode(t, out, &r)
			return r
		}
	}
	clients := map[string]func(t *testing.T, http bool) ecoClientReport{
		"inspector-cli": func(t *testing.T, http bool) ecoClientReport {
			// The Inspector CLI reads its own package.json as "../package.json" relative
			// to the working directory, so it runs from its build directory.
			dir := filepath.Join(p.dir, "node_modules/@modelcontextprotocol/inspector-cli/build")
			inspect := func(method ...string) string {
				// Over stdio the server's command goes after "--": the Inspector would
				// take the server's own --config for its config file.
				args := append(append([]string{"cli.js", "--cli", "--"}, stdio...), method...)
				if http {
					args = append([]string{"cli.js", "--cli", url, "--transport", "http", "--header", "Authorization: Bearer " + ecoToken}, method...)
				}
				out, err := ecoRun(t, time.Minute, dir, p.env(), p.node, args...)
				if err != nil {
					t.Fatalf("inspector-cli %v: %v", method, err)
				}
				if i := strings.Index(out, "{"); i >= 0 {
					return out[i:]
				}
				t.Fatalf("inspector-cli %v printed no JSON: %s", method, out)
				return ""
			}
			var list struct{ Tools []struct{ Name string } }
			ecoDecode(t, inspect("--method", "tools/list"), &list)
			var call struct {
				IsError           bool `json:"isError"`
				Content           []struct{ Type, Text string }
				StructuredContent json.RawMessage
			}
			ecoDecode(t, inspect("--method", "tools/call", "--tool-name", "run_code", "--tool-arg", "code=6*7"), &call)
			r := ecoClientReport{IsError: call.IsError, Structured: call.StructuredContent}
			for _, tl := range list.Tools {
				r.Tools = append(r.Tools, tl.Name)
			}
			for _, c := range call.Content {
				r.Text += c.Text
			}
			return r
		},
		"ts-sdk":    tsClient("v1"),
		"ts-sdk-v2": tsClient("v2"),
		"mcp-go": func(t *testing.T, http bool) ecoClientReport {
			args := append([]string{"--"}, stdio...)
			if http {
				// Pinned to the session revision; TestMCPGoModernHTTP covers the default
				// handshake, which settles on the sessionless 2026-07-28.
				args = []string{"-url", url, "-token", ecoToken, "-protocol", "2025-11-25"}
			}
			out, err := ecoRun(t, time.Minute, p.dir, os.Environ(), mcpgo, args...)
			if err != nil {
				t.Fatalf("mcpgoclient: %v", err)
			}
			var r ecoClientReport
			ecoDecode(t, out, &r)
			if http && r.Protocol != "2025-11-25" {
				t.Errorf("pinned to 2025-11-25, mcp-go settled on %q", r.Protocol)
			}
			return r
		},
	}
	for _, name := range []string{"inspector-cli", "ts-sdk", "ts-sdk-v2", "mcp-go"} {
		for _, transport := range []string{"stdio", "http"} {
			t.Run(name+"/"+transport, func(t *testing.T) {
				r := clients[name](t, transport == "http")
				ecoCheck42(t, r)
			})
		}
	}
}

// TestMCPGoModernHTTP: mcp-go's default handshake probes the 2026-07-28 revision with
// server/discover; mcpserver answers it from its sessionless handler, so the client stays on
// that revision (every request carrying its own metadata, no session) and runs 6*7. Pinned to
// 2025-11-25 the same client takes the initialize handshake and a session (TestRealClients).
func TestMCPGoModernHTTP(t *testing.T) {
	cfg, err := filepath.Abs("testdata/clients.yaml")
	if err != nil {
		t.Fatal(err)
	}
	url := ecoStartHTTP(t, cfg) + "/mcp"
	out, err := ecoRun(t, time.Minute, ".", os.Environ(), ecoBuildMCPGoClient(t), "-url", url, "-token", ecoToken)
	if err != nil {
		t.Fatalf("mcp-go's default handshake over HTTP: %v\n%.500s", err, out)
	}
	var r ecoClientReport
	ecoDecode(t, out, &r)
	ecoCheck42(t, r)
	if r.Protocol != "2026-07-28" {
		t.Errorf("mcp-go settled on revision %q, want 2026-07-28", r.Protocol)
	}
}

func ecoCheck42(t *testing.T, r ecoClientReport) {
	t.Helper()
	if !slices.Contains(r.Tools, "run_code") {
		t.Errorf("tools/list = %v, want run_code among them", r.Tools)
	}
	var s struct {
		Value   json.RawMessage `json:"value"`
		Failure json.RawMessage `json:"failure"`
	}
	if err := json.Unmarshal(r.Structured, &s); err != nil {
		t.Fatalf("structuredContent %s: %v", r.Structured, err)
	}
	// What the model reads of a plain success: the value, no failure key.
	if r.IsError || string(s.Value) != "42" || s.Failure != nil {
		t.Errorf("run_code 6*7: isError %v, value %s, failure %s, text %q", r.IsError, s.Value, s.Failure, r.Text)
	}
	if !strings.Contains(r.Text, "value: 42") {
		t.Errorf("run_code text lacks \"value: 42\": %q", r.Text)
	}
}

func ecoDecode(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(strings.TrimSpace(s)), v); err != nil {
		t.Fatalf("decoding %.500s: %v", s, err)
	}
}

// ecoBuildMCPGoClient builds the nested module mcpgoclient (its own go.mod, so mcp-go stays
// out of the main module) into a temporary directory.
func ecoBuildMCPGoClient(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "mcpgoclient")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = "mcpgoclient"
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building mcpgoclient: %v\n%s", err, b)
	}
	return out
}

// TestInspectorStrict: the MCP Inspector 2.12 CLI's --strict tools/list, which reports every
// tool schema portability problem (a nullable type list, a schema that constrains nothing), has
// nothing to say of mcp-sandbox's tools, run_code's outputSchema included.
func TestInspectorStrict(t *testing.T) {
	p := ecoNeedPeers(t)
	launcher := filepath.Join(p.dir, "node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")
	if _, err := os.Stat(launcher); err != nil {
		gate.Require(t, "npm-peers", false, "the Inspector 2.12 is not installed: "+err.Error())
	}
	env := append(p.env(), "MCP_CATALOG_PATH="+filepath.Join(t.TempDir(), "catalog.json"))
	ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(time.Minute))
	defer cancel()
	cmd := exec.CommandContext(ctx, p.node, launcher, "--cli", "--strict", "--method", "tools/list", testkit.Binary(t), "serve")
	cmd.Dir, cmd.Env = p.dir, env
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil || !strings.Contains(out.String(), `"run_code"`) {
		t.Fatalf("mcp-inspector --cli --strict tools/list: %v\nstdout %.1000s\nstderr %s", err, out.String(), errb.String())
	}
	if strings.Contains(strings.ToLower(errb.String()+out.String()), "warning") {
		t.Errorf("the Inspector warns of mcp-sandbox's tools:\n%s", errb.String())
	}
}
