package conformance

import (
	"encoding/json"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/userns"
)

// TestNewcomerPath clones this checkout into a temporary directory and follows the README's
// first code block: `make run` is started by a real MCP client (the TypeScript SDK script)
// speaking over its stdin and stdout, which lists the server's tools and runs one program
// through run_code on the embedded default, unedited; `make test` is not run again from
// inside make test, but must be the command .ci/run runs.
//
// CI runs it as root and as users without root, with and without a subordinate id range:
// wherever this host lets the user make namespaces the program runs at the isolated level,
// and its identity is its own (enforced) exactly when the user is root or has a range.
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
	// make run serves over stdio until its stdin closes; the client closes it when done. It
	// answers initialize only after its first build, which a loaded machine may take minutes
	// over: the client waits for it as long as the whole test does.
	budget := gate.Scaled(6 * time.Minute)
	args := append([]string{filepath.Join(p.dir, "clients/ts-client.mjs"), "--code", `print("hello"); 6*7`,
		"--connect-timeout-ms", strconv.FormatInt(budget.Milliseconds(), 10), "--"}, strings.Fields(commands[0])...)
	out, stderr, err := ecoRunStderr(t, budget, clone, p.env(), p.node, args...)
	if err != nil {
		t.Fatalf("a real client on %q in a fresh clone: %v", commands[0], err)
	}
	// A first build is minutes of compiling: make says so on stderr before it starts (stdout
	// carries MCP frames only, which the client's reading of them proves).
	if !strings.Contains(stderr, "the first build") {
		t.Errorf("%q did not say on stderr what it builds and that a first build takes minutes:\n%.2000s", commands[0], stderr)
	}
	var r ecoClientReport
	ecoDecode(t, out, &r)
	if !slices.Contains(r.Tools, "run_code") {
		t.Fatalf("tools listed through %q = %v, want run_code among them", commands[0], r.Tools)
	}
	var res struct {
		Value      json.RawMessage   `json:"value"`
		Stdout     string            `json:"stdout"`
		Failure    *json.RawMessage  `json:"failure"`
		Isolation  string            `json:"isolation"`
		Guarantees map[string]string `json:"guarantees"`
	}
	if err := json.Unmarshal(r.Report, &res); err != nil {
		t.Fatalf("run_code's report %s: %v", r.Report, err)
	}
	// What the model reads says every guarantee below enforced, the identity of a user
	// without a subordinate range among them.
	var lean struct {
		Guarantees map[string]string `json:"guarantees"`
	}
	if err := json.Unmarshal(r.Structured, &lean); err != nil {
		t.Fatalf("run_code's structured result %s: %v", r.Structured, err)
	}
	for d, g := range res.Guarantees {
		if g != "enforced" && lean.Guarantees[d] != g {
			t.Errorf("guarantee %s is %s, and the model does not read it: %s", d, g, r.Structured)
		}
	}
	if r.IsError || res.Failure != nil || string(res.Value) != "42" || res.Stdout != "hello\n" {
		t.Fatalf("run_code on the embedded default (uid %d): is_error %v, %s", os.Geteuid(), r.IsError, r.Text)
	}
	// What this host offers, read from its settings, not from the code under test.
	h := userns.Host{}
	if blocked := h.Blocked(""); os.Geteuid() == 0 || blocked == "" {
		if res.Isolation != "isolated" {
			t.Errorf("isolation %s where namespaces can be made, want isolated", res.Isolation)
		}
	} else {
		t.Logf("user namespaces are blocked here (%s): isolation %s", blocked, res.Isolation)
	}
	wantIdentity := "enforced"
	if u, err := user.Current(); os.Geteuid() != 0 && (err != nil || !hasRange(h, u.Username)) {
		wantIdentity = "unavailable"
	}
	if res.Guarantees["identity"] != wantIdentity {
		t.Errorf("identity graded %s for uid %d, want %s", res.Guarantees["identity"], os.Geteuid(), wantIdentity)
	}
	t.Logf("clone to first result as uid %d (tools %v, isolation %s, identity %s) took %s", os.Geteuid(), r.Tools,
		res.Isolation, res.Guarantees["identity"], time.Since(start).Round(time.Millisecond))
}

func hasRange(h userns.Host, name string) bool {
	sub, _ := h.Subordinate(name, os.Geteuid())
	return sub != nil
}
