package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// runConfig is one tenant t with two mock upstreams (support and docs), a data dir, a small
// preview (so a few hundred bytes of stdout go to the blob store), preserve: required, a
// binding budget of maxCalls calls, and bindings that name a tool no server offers.
func runConfig(t *testing.T, dataDir string, maxCalls int) string {
	return fmt.Sprintf(`
data_dir: %[2]q
`+processProfile+`    hard_limits: {wall_seconds: 60}
    binding_budget: {max_calls: %[3]d}
    output: {preview_bytes: 200, preserve: required}
upstreams:
  support: {command: [%[1]q]}
  docs:    {command: [%[1]q]}
tenants:
  t:
    upstreams: [support, docs]
    policy: {deny: ["support__class"]}
    agents:
      default:
        code_execution:
          limits: {wall_seconds: 60}
          bindings: ["support__*", "docs__list-repos", "docs__nope"]
`, built.mock, dataDir, maxCalls)
}

// sandboxCLI runs the built binary with args and stdin; it returns stdout, stderr and the exit
// status.
func sandboxCLI(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, built.sandbox, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("mcp-sandbox %v: %v", args, err)
	}
	return o.String(), e.String(), 0
}

// sameFields is what `run` and run_code must agree on: everything but timings and the handles'
// values (each kept output gets a fresh handle; whether it has one must agree).
type sameFields struct {
	Value       any          `json:"value"`
	Stdout      string       `json:"stdout"`
	StdoutSize  int64        `json:"stdout_size"`
	Failure     *runFailure  `json:"failure"`
	Attachments []attachment `json:"attachments"`
	Artifacts   []attachment `json:"artifacts"`
	Unavailable []string     `json:"unavailable_bindings"`
	Approvals   struct {
		Asked   int `json:"asked"`
		Unasked int `json:"unasked"`
	} `json:"approvals"`
	Budget struct {
		Execution usage `json:"execution"`
		Run       usage `json:"run"`
	} `json:"budget"`
}

type runFailure struct {
	Kind     string `json:"kind"`
	Message  string `json:"message"`
	Executed bool   `json:"executed"`
}

func decodeSame(t *testing.T, b []byte) (sameFields, map[string]string) {
	t.Helper()
	var r sameFields
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("result %s: %v", b, err)
	}
	handles := map[string]string{}
	for _, as := range [][]attachment{r.Attachments, r.Artifacts} {
		for i := range as {
			if (as[i].Handle != "") != (as[i].Location == "blob") {
				t.Errorf("attachment %+v: a handle exactly when location is blob", as[i])
			}
			handles[as[i].Name] = as[i].Handle
			as[i].Handle = strings.Repeat("h", min(len(as[i].Handle), 1))
		}
	}
	return r, handles
}

// wholeResult is the whole result as JSON values, less what differs by nature between two
// executions of one program: the duration, and the value of each handle (whether there is
// one is kept). Every field the result has, now or later, is compared.
func wholeResult(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("result %s: %v", b, err)
	}
	delete(m, "duration_seconds")
	// How the child was made is not compared: run execs its one child, while a server's warm
	// pool forks its children from a template where the host allows it (docs/design.md §4.4).
	// Everything else must match.
	if st, ok := m["start"].(map[string]any); ok {
		if k, _ := st["kind"].(string); k == "forked" || k == "exec" {
			m["start"] = map[string]any{"kind": "exec or forked"}
		}
	}
	for _, key := range []string{"attachments", "artifacts"} {
		as, _ := m[key].([]any)
		for _, a := range as {
			if a, ok := a.(map[string]any); ok && a["handle"] != nil {
				a["handle"] = "h"
			}
		}
	}
	return m
}

// The program a model would run with run_code and a user tries from the shell.
const sameProgram = `
kinds = {}
for name in ("support__delete-everything", "support__class", "docs__nope", "docs__list_repos", "run_code"):
    try:
        await call_tool(name, {})
        kinds[name] = "ok"
    except ToolError as e:
        kinds[name] = e.kind
row = await support__lookup(sku="A")
print("\n".join(f"line {i}" for i in range(300)))
open("report.txt", "w").write("x" * 3000)
return {"tools": TOOLS, "row": row, "kinds": kinds}
`

// A file under a path longer than the blob store takes (1 KiB): it cannot be kept, which under
// preserve: required is a failure. It is larger than the preview (200 bytes), so it does not
// come back whole in the result either (a small text artifact would: nothing of it is lost).
const unkeptProgram = `
import os
d = "/".join(["d" * 200] * 6)
os.makedirs(d)
open(d + "/f.txt", "w").write("x" * 300)
print("wrote it")
`

// TestRunIsRunCode: `mcp-sandbox run` is the execution run_code is (issue 10 §2). For the same
// config and program, the shell and an MCP host get the same TOOLS, refusals, bindings,
// budgets, attachments kept under handles, and the same failure under preserve: required; and
// a handle either one got is readable by both (read_tool_output, read-output).
func TestRunIsRunCode(t *testing.T) {
	dir := t.TempDir()
	cfg := testkit.WriteConfig(t, runConfig(t, filepath.Join(dir, "data"), 20))
	cs, _ := serveProc(t, cfg, testkit.NewLog(t, "server"))

	cases := []struct {
		name, program string
		exit          int
	}{
		{"upstreams, refusals, handles", sameProgram, 0},
		{"preserve required", unkeptProgram, 1},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := sandboxCLI(t, c.program, "run", "--config", cfg, "-")
			if code != c.exit {
				t.Fatalf("run: exit %d, want %d\nstdout %s\nstderr %s", code, c.exit, out, errOut)
			}
			served := runCodeIn(t, cs, fmt.Sprintf("same-%d", i), c.program)
			fromRun, runHandles := decodeSame(t, []byte(out))
			fromServe, serveHandles := decodeSame(t, served)
			if d := cmp.Diff(fromServe, fromRun); d != "" {
				t.Errorf("run differs from run_code (-run_code +run):\n%s", d)
			}
			if d := cmp.Diff(wholeResult(t, served), wholeResult(t, []byte(out))); d != "" {
				t.Errorf("run's whole result differs from run_code's (-run_code +run):\n%s", d)
			}
			if c.exit != 0 {
				if fromRun.Failure == nil || fromRun.Failure.Kind != "output_not_preserved" || !fromRun.Failure.Executed {
					t.Errorf("failure %+v, want output_not_preserved", fromRun.Failure)
				}
				return
			}
			var v struct {
				Tools []string          `json:"tools"`
				Kinds map[string]string `json:"kinds"`
			}
			b, _ := json.Marshal(fromRun.Value)
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatal(err)
			}
			if len(v.Tools) < 10 || !slices.Contains(v.Tools, "support__lookup") || !slices.Contains(v.Tools, "docs__list-repos") || slices.Contains(v.Tools, "docs__list_repos") {
				t.Errorf("TOOLS = %v, want support's tools and docs__list-repos only", v.Tools)
			}
			want := map[string]string{"support__delete-everything": "approval_required_in_program", "support__class": "denied",
				"docs__nope": "unavailable", "docs__list_repos": "unavailable", "run_code": "excluded_builtin"}
			if d := cmp.Diff(want, v.Kinds); d != "" {
				t.Errorf("refusals (-want +got):\n%s", d)
			}
			if fromRun.Budget.Execution.Calls != 1 || fromRun.Budget.Run != fromRun.Budget.Execution {
				t.Errorf("budget %+v: want one call, in a Run of its own", fromRun.Budget)
			}
			if fromRun.Approvals.Unasked != 1 || fromRun.Approvals.Asked != 0 {
				t.Errorf("approvals %+v: want the one call that needs approval refused unasked", fromRun.Approvals)
			}
			if !slices.Contains(fromRun.Unavailable, "docs__nope") {
				t.Errorf("unavailable_bindings = %v", fromRun.Unavailable)
			}
			// Each side's kept stdout reads the same from the other side.
			for _, h := range []string{runHandles["stdout"], serveHandles["stdout"]} {
				got, errOut, code := sandboxCLI(t, "", "read-output", "--config", cfg, "--offset", "10", "--limit", "3", h)
				if code != 0 || got != "line 10\nline 11\nline 12\n" {
					t.Errorf("read-output %s: exit %d, %q, stderr %s", h, code, got, errOut)
				}
				res := call(t, cs, "read_tool_output", map[string]any{"handle": h, "pattern": "^line 29[0-9]$", "limit": 2})
				if res.IsError || testkit.Text(res) != "290: line 290\n291: line 291\n(more matches were left out; narrow the pattern or raise limit)\n" {
					t.Errorf("read_tool_output %s: %q", h, testkit.Text(res))
				}
			}
			got, _, code := sandboxCLI(t, "", "read-output", "--config", cfg, runHandles["report.txt"])
			if code != 0 || got != strings.Repeat("x", 3000) {
				t.Errorf("read-output of the artifact: exit %d, %d bytes", code, len(got))
			}
		})
	}
}

// TestRunBudgetPerRun: each `run` is a Run of its own unless --run names one; a named Run is
// the same Run as run_code's _meta "mcp-sandbox/run" of the same name, so its budget is spent
// from the shell and from the host alike, counted in the ledger.
func TestRunBudgetPerRun(t *testing.T) {
	dir := t.TempDir()
	cfg := testkit.WriteConfig(t, runConfig(t, filepath.Join(dir, "data"), 3))
	const twoCalls = `
kinds = []
for sku in ("A", "B"):
    try:
        await support__lookup(sku=sku)
        kinds.append("ok")
    except ToolError as e:
        kinds.append(e.kind)
return kinds
`
	kinds := func(b []byte) string {
		var r struct {
			Value []string `json:"value"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("result %s: %v", b, err)
		}
		return strings.Join(r.Value, ",")
	}
	for i, want := range []string{"ok,ok", "ok,budget_exceeded", "budget_exceeded,budget_exceeded"} {
		out, errOut, code := sandboxCLI(t, twoCalls, "run", "--config", cfg, "--run", "shared", "-")
		if code != 0 || kinds([]byte(out)) != want {
			t.Fatalf("run --run shared #%d: exit %d, kinds %s, want %s\n%s", i+1, code, kinds([]byte(out)), want, errOut)
		}
	}
	for i := 0; i < 2; i++ {
		out, _, code := sandboxCLI(t, twoCalls, "run", "--config", cfg, "-")
		if code != 0 || kinds([]byte(out)) != "ok,ok" {
			t.Fatalf("run without --run #%d: exit %d, kinds %s: each run is a Run of its own", i+1, code, kinds([]byte(out)))
		}
	}
	cs, _ := serveProc(t, cfg, testkit.NewLog(t, "server"))
	if got := kinds(runCodeIn(t, cs, "shared", twoCalls)); got != "budget_exceeded,budget_exceeded" {
		t.Errorf("run_code in the Run the shell spent: %s", got)
	}
	if got := kinds(runCodeIn(t, cs, "fresh", twoCalls)); got != "ok,ok" {
		t.Errorf("run_code in a fresh Run: %s", got)
	}
}

// TestReadOutputRefusals: read-output reads only the tenant's own handles, and a foreign or
// unknown handle reads the same, with exit status 1; a bad window is a usage error.
func TestReadOutputRefusals(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfg := testkit.WriteConfig(t, runConfig(t, data, 20)+`
  other:
    agents:
      default: {code_execution: {}}
`)
	out, errOut, code := sandboxCLI(t, `print("\n".join(str(i) for i in range(100)))`, "run", "--config", cfg, "--tenant", "t", "-")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, errOut)
	}
	_, handles := decodeSame(t, []byte(out))
	h := handles["stdout"]
	if h == "" {
		t.Fatalf("no stdout handle in %s", out)
	}
	if got, _, code := sandboxCLI(t, "", "read-output", "--config", cfg, "--tenant", "t", "--pattern", "^9[89]$", h); code != 0 || got != "98: 98\n99: 99\n" {
		t.Errorf("read-output --pattern: exit %d, %q", code, got)
	}
	_, foreign, code := sandboxCLI(t, "", "read-output", "--config", cfg, "--tenant", "other", h)
	_, unknown, code2 := sandboxCLI(t, "", "read-output", "--config", cfg, "--tenant", "other", "h_"+strings.Repeat("0", 32))
	if code != 1 || code2 != 1 || foreign != unknown || strings.Contains(foreign, h) {
		t.Errorf("another tenant's handle: exit %d, %q; an unknown one: exit %d, %q; want both 1 and the same words", code, foreign, code2, unknown)
	}
	if _, errOut, code := sandboxCLI(t, "", "read-output", "--config", cfg, "--tenant", "t", "--offset", "-1", h); code != 2 || errOut == "" {
		t.Errorf("negative offset: exit %d, %q", code, errOut)
	}
}
