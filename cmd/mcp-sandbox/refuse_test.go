package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/assembly"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// isolatedConfig: one agent whose profile requires the isolated level, one at the process
// level. MARKER is where a program that ran would leave its mark.
const isolatedConfig = `
data_dir: "-"
profiles:
  strong: {backend: local, isolation: isolated}
  weak:   {backend: local, isolation: process}
tenants:
  t:
    agents:
      strong: {code_execution: {profile: strong, isolation: isolated}}
      weak:   {code_execution: {profile: weak}}
`

// noKernelBoundary stands in for a host where nothing reaches the isolated level.
var noKernelBoundary = []string{assembly.DisableEnv + "=namespaces,bwrap"}

// TestServeWhenNoProfileCanRun: when the only profile in use requires a level this host
// cannot reach, serve still serves: tools/list offers run_code (its description says why
// programs are refused), a call of it returns the isolation_unavailable refusal as its result
// and nothing runs, list_tools keeps working, and the log and doctor say why.
func TestServeWhenNoProfileCanRun(t *testing.T) {
	cfg := testkit.WriteConfig(t, isolatedConfig)
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	marker := filepath.Join(dir, "marker")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.Command(testkit.Binary(t), "serve", "--config", cfg, "--tenant", "t", "--agent", "strong")
	cmd.Env = append(os.Environ(), noKernelBoundary...)
	log := testkit.NewLog(t, "server")
	cmd.Stderr = log
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "refuse-test", Version: "0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("serve did not start: %v\n%s", err, log.String())
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var desc string
	for _, tl := range tools.Tools {
		if tl.Name == "run_code" {
			desc = tl.Description
		}
	}
	if desc == "" {
		t.Fatalf("tools/list lacks run_code: %v", toolNames(t, cs))
	}
	if !strings.Contains(desc, "programs are currently refused") || !strings.Contains(desc, `isolation "isolated"`) {
		t.Errorf("run_code's description does not say why programs are refused:\n%s", desc)
	}
	res, r := runCode(t, ctx, cs, "open("+strconv.Quote(marker)+", 'w').write('ran')\n42", nil)
	if !res.IsError || r.Failure == nil || r.Failure.Kind != "isolation_unavailable" || r.Failure.Executed {
		t.Fatalf("want an isolation_unavailable refusal as run_code's result, got %+v (%s)", r.Failure, testkit.Text(res))
	}
	if !strings.Contains(testkit.Text(res), "apt-get install bubblewrap") {
		t.Errorf("the refusal does not say what to install: %s", testkit.Text(res))
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the refused program ran: its marker exists")
	}
	if lt, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_tools", Arguments: map[string]any{}}); err != nil || lt.IsError {
		t.Fatalf("list_tools after the refusal: %v %+v", err, lt)
	}
	for _, want := range []string{"no sandbox profile can run on this host", "run_code will answer every call with the refusal", `isolation \"isolated\"`} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, log.String())
		}
	}
	// Over stdio the host keeps stderr as its MCP log: warnings and errors only by default.
	if strings.Contains(log.String(), "level=INFO") {
		t.Errorf("serve over stdio logged info lines by default:\n%s", log.String())
	}
	doctor := exec.Command(testkit.Binary(t), "doctor", "--config", cfg)
	doctor.Env = append(os.Environ(), noKernelBoundary...)
	out, _ := doctor.CombinedOutput()
	if !strings.Contains(string(out), `isolation "isolated"`) || !strings.Contains(string(out), "apt-get install bubblewrap") {
		t.Errorf("doctor does not say why profile strong cannot run:\n%s", out)
	}
}

// TestServeIsolationRefusalIsAResult: with another profile that can run, the server starts,
// and the agent whose profile cannot be met gets a structured isolation_unavailable refusal:
// nothing runs (no marker on the host) and its other tools keep working.
func TestServeIsolationRefusalIsAResult(t *testing.T) {
	cfg := testkit.WriteConfig(t, isolatedConfig)
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	marker := filepath.Join(dir, "marker")
	base := startHTTPEnv(t, cfg, noKernelBoundary)
	ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(30*time.Second))
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "refuse-test", Version: "0"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp/strong"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, r := runCode(t, ctx, cs, "open("+strconv.Quote(marker)+", 'w').write('ran')\n42", nil)
	if !res.IsError || r.Failure == nil || r.Failure.Kind != "isolation_unavailable" || r.Failure.Executed {
		t.Fatalf("want an isolation_unavailable refusal, got %+v (%s)", r.Failure, testkit.Text(res))
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the refused program ran: its marker exists")
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_tools", Arguments: map[string]any{}}); err != nil {
		t.Fatalf("list_tools after the refusal: %v", err)
	}
}

// TestRunIsolationRefusal: `run` with a profile this host cannot reach prints a refusal of
// kind isolation_unavailable (not backend_unavailable), with the message as the failure says
// it and the terms it would have run under, and exits 1.
func TestRunIsolationRefusal(t *testing.T) {
	cfg := testkit.WriteConfig(t, isolatedConfig)
	cmd := exec.Command(testkit.Binary(t), "run", "--config", cfg, "--tenant", "t", "--agent", "strong", "-")
	cmd.Env = append(os.Environ(), noKernelBoundary...)
	cmd.Stdin = strings.NewReader("42")
	var out strings.Builder
	cmd.Stdout = &out
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("run: %v, want exit status 1\n%s", err, out.String())
	}
	r := decodeResult(t, out.String())
	if r.Failure == nil || r.Failure.Kind != "isolation_unavailable" || strings.HasPrefix(r.Failure.Message, "isolation_unavailable:") {
		t.Fatalf("failure = %+v", r.Failure)
	}
	if r.Terms.WallSeconds <= 0 {
		t.Errorf("terms are zero: wall_seconds %v", r.Terms.WallSeconds)
	}
}
