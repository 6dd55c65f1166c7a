//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// Claude Desktop on Windows with a remote backend: mcp-sandbox.exe, under Wine (wine64 and the
// prefix .ci/run prepares, MCP_SANDBOX_WINEPREFIX), runs a program through a sandbox-service on
// this host's loopback and prints its result. The program runs on the service's local
// backend; what this shows is the Windows binary's remote path: the config, the remote client,
// the result. Its local backend, a Job Object running a Windows CPython, is run under Wine by
// engine/backend/jobobject's TestRunUnderWine.
func TestWindowsBinaryRunsThroughARemoteBackendUnderWine(t *testing.T) {
	wine := "/usr/lib/wine/wine64"
	prefix := os.Getenv("MCP_SANDBOX_WINEPREFIX")
	_, wineErr := os.Stat(wine)
	_, shimErr := os.Stat(filepath.Join(prefix, "drive_c", "windows", "system32", "bcryptprimitives.dll"))
	gate.Require(t, "wine", wineErr == nil && prefix != "" && shimErr == nil,
		"needs wine64 (apt-get install wine64) and MCP_SANDBOX_WINEPREFIX naming a prefix with the Go runtime's bcryptprimitives.dll shim, as .ci/run prepares")
	prefix = testkit.OwnWinePrefix(t, prefix)
	url, token, _, _ := startService(t)

	dir := t.TempDir()
	exe := filepath.Join(dir, "mcp-sandbox.exe")
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command, to build the windows binary: %v", err)
	}
	build := exec.Command(goBin, "build", "-o", exe, ".")
	build.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building mcp-sandbox.exe: %v\n%s", err, out)
	}
	cfg := filepath.Join(dir, "windows.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
profiles:
  default: {backend: remote, isolation: process, remote: {url: %q, bearer: {env: MCP_SANDBOX_TEST_SERVICE_TOKEN}}}
tenants:
  local: {agents: {default: {code_execution: {profile: default, isolation: process}}}}
`, url)), 0o644); err != nil {
		t.Fatal(err)
	}
	run := exec.Command(wine, exe, "run", "--config", cfg, "-")
	run.Dir = dir
	run.Env = append(os.Environ(), "WINEPREFIX="+prefix, "WINEDEBUG=-all", "MCP_SANDBOX_TEST_SERVICE_TOKEN="+token)
	run.Stdin = strings.NewReader("print(42)\n")
	var stderr strings.Builder
	run.Stderr = &stderr
	out, err := run.Output()
	if err != nil {
		t.Fatalf("mcp-sandbox.exe run under Wine: %v\nstdout %s\nstderr %s", err, out, stderr.String())
	}
	var res struct {
		Stdout  string          `json:"stdout"`
		Failure json.RawMessage `json:"failure"`
	}
	if err := json.Unmarshal(out, &res); err != nil || res.Stdout != "42\n" || string(res.Failure) != "null" {
		t.Fatalf("mcp-sandbox.exe run: stdout %q, failure %s (%v)\n%s", res.Stdout, res.Failure, err, out)
	}
}
