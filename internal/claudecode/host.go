package claudecode

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// Server is one MCP server Claude Code starts over stdio.
type Server struct {
	Command string   `json:"command"`
	Args    []string `json:"args,omitempty"`
}

// Options is one non-interactive claude run; Run requires them.
type Options struct {
	// Claude is the claude executable (conformance/node_modules/.bin/claude).
	Claude string
	// Servers are the MCP servers of --mcp-config, by name (tools are mcp__<name>__<tool>).
	Servers map[string]Server
	// AllowedTools are the tools it may call without asking (--allowedTools).
	AllowedTools []string
	// Prompt is the user's prompt; Timeout bounds the run (stretched by the machine's load).
	Prompt  string
	Timeout time.Duration
}

// Output is claude's --output-format json result.
type Output struct {
	IsError bool   `json:"is_error"`
	Result  string `json:"result"`
	NumTurn int    `json:"num_turns"`
}

// Run runs claude -p non-interactively against model, in a network namespace of its own with
// only loopback up, and returns its output; claude's stderr goes to the test's log when it
// fails. The test skips, or fails under MCP_SANDBOX_REQUIRE, where no such namespace can be
// made (capability "netns").
func Run(t testing.TB, model *Model, o *Options) Output {
	t.Helper()
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{"mcpServers": o.Servers})
	cfgPath := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	timeout := gate.Scaled(o.Timeout)
	if o.Timeout == 0 {
		timeout = gate.Scaled(2 * time.Minute)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	srv := &http.Server{Handler: model, ReadHeaderTimeout: 30 * time.Second}
	served := make(chan error, 1)
	err := inLoopbackNetns(func() error {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		go func() { served <- srv.Serve(ln) }()
		cmd := exec.CommandContext(ctx, o.Claude, "-p", o.Prompt, "--output-format", "json", "--mcp-config", cfgPath,
			"--strict-mcp-config", "--allowedTools", strings.Join(o.AllowedTools, ","), "--no-session-persistence")
		cmd.Dir = dir
		// An environment built from nothing: the API at the scripted model, a dummy key, and
		// nothing that would phone home.
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"),
			"ANTHROPIC_BASE_URL=http://" + ln.Addr().String(), "ANTHROPIC_API_KEY=sk-ant-scripted-model",
			"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1",
			"DISABLE_ERROR_REPORTING=1", "DISABLE_BUG_COMMAND=1", "CLAUDE_CODE_ENABLE_TELEMETRY=0",
			// -p connects --mcp-config servers in the background by default, so the first
			// request may list none of their tools: wait for them, as an interactive session
			// does before its first prompt.
			"MCP_CONNECTION_NONBLOCKING=false"}
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.WaitDelay = 10 * time.Second
		return cmd.Run()
	})
	_ = srv.Close()
	if e, ok := err.(netnsError); ok {
		gate.Require(t, "netns", false, e.Error())
	}
	if err == nil {
		<-served
	}
	var out Output
	if err != nil || json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &out) != nil {
		t.Fatalf("claude: %v\nstdout: %.2000s\nstderr: %.4000s", err, stdout.String(), stderr.String())
	}
	if out.IsError {
		t.Fatalf("claude reported an error: %s\nstderr: %.4000s", stdout.String(), stderr.String())
	}
	return out
}

// netnsError says why no network namespace could be made.
type netnsError struct{ why string }

func (e netnsError) Error() string { return e.why }

// Claude returns the claude executable the conformance suite's npm peers hold
// (conformance/node_modules/.bin/claude in from or a directory above it), or skips (fails in
// CI) without them (capability "npm-peers").
func Claude(t testing.TB, from string) string {
	t.Helper()
	for dir := from; ; dir = filepath.Dir(dir) {
		p := filepath.Join(dir, "conformance", "node_modules", ".bin", "claude")
		if _, err := os.Stat(p); err == nil {
			return p
		}
		if filepath.Dir(dir) == dir {
			break
		}
	}
	gate.Require(t, "npm-peers", false, "conformance/node_modules/.bin/claude is missing: run npm ci --prefix conformance --no-audit --no-fund")
	return ""
}
