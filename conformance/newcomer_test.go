package conformance

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// TestNewcomerPath clones this checkout into a temporary directory and follows the README's
// first code block: `make run` is started by a real MCP client (the TypeScript SDK script)
// speaking over its stdin and stdout, which lists the server's tools; `make test` is not run
// again from inside make test, but must be the command .ci/run runs.
func TestNewcomerPath(t *testing.T) {
	p := ecoNeedPeers(t)
	for _, tool := range []string{"git", "make", "go"} {
		_, err := exec.LookPath(tool)
		gate.Require(t, "newcomer-tools", err == nil, tool+" is not on PATH")
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```sh\n(.*?)```").FindSubmatch(readme)
	if block == nil {
		t.Fatal("README.md has no sh code block")
	}
	var commands []string
	for _, line := range strings.Split(strings.TrimSpace(string(block[1])), "\n") {
		commands = append(commands, strings.TrimSpace(strings.SplitN(line, "#", 2)[0]))
	}
	if len(commands) != 2 || commands[0] != "make run" {
		t.Fatalf("README's first code block = %q, want [make run, <test command>]", commands)
	}
	ci, err := os.ReadFile("../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Split(string(ci), "\n"), commands[1]) {
		t.Errorf(".ci/run does not run the README's test command %q", commands[1])
	}
	t.Logf("README test command %q is what .ci/run runs; not run again here (it would recurse into this test)", commands[1])

	start := time.Now()
	clone := filepath.Join(t.TempDir(), "mcp-sandbox")
	if out, err := exec.Command("git", "clone", "-q", "..", clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	// make run serves over stdio until its stdin closes; the client closes it when done.
	args := append([]string{filepath.Join(p.dir, "clients/ts-client.mjs"), "--call", "no", "--"}, strings.Fields(commands[0])...)
	out, err := ecoRun(t, 3*time.Minute, clone, p.env(), p.node, args...)
	if err != nil {
		t.Fatalf("a real client on %q in a fresh clone: %v", commands[0], err)
	}
	var r ecoClientReport
	ecoDecode(t, out, &r)
	if !slices.Contains(r.Tools, "run_code") {
		t.Fatalf("tools listed through %q = %v, want run_code among them", commands[0], r.Tools)
	}
	t.Logf("clone to first result (tools %v) took %s", r.Tools, time.Since(start).Round(time.Millisecond))
}
