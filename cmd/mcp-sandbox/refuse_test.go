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
var noKernelBoundary = []string{DisableEnv + "=namespaces,bwrap"}

// TestServeRefusesWhenNoProfileCanRun: when the only profile in use requires a level this
// host cannot reach, serve stops at startup with guidance instead of refusing every call.
func TestServeRefusesWhenNoProfileCanRun(t *testing.T) {
	cfg := testkit.WriteConfig(t, isolatedConfig)
	cmd := exec.Command(testkit.Binary(t), "serve", "--config", cfg, "--tenant", "t", "--agent", "strong")
	cmd.Env = append(os.Environ(), noKernelBoundary...)
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("serve: %v, want exit status 1\n%s", err, out)
	}
	for _, want := range []string{"no sandbox profile can run", `isolation "isolated"`, "apt-get install bubblewrap"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("stderr lacks %q:\n%s", want, out)
		}
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
