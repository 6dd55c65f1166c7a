package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

func runCLI(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(testkit.Binary(t), args...)
	cmd.Stdin = strings.NewReader(stdin)
	// run keeps its ledger and outputs in the default data dir, as serve does: the test's own.
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir())
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

type cliResult struct {
	Value   json.RawMessage `json:"value"`
	Stdout  string          `json:"stdout"`
	Failure *struct {
		Kind      string `json:"kind"`
		Message   string `json:"message"`
		Traceback string `json:"traceback"`
		Executed  bool   `json:"executed"`
	} `json:"failure"`
	Terms struct {
		WallSeconds float64 `json:"wall_seconds"`
	} `json:"terms"`
	Guarantees map[string]string `json:"guarantees"`
}

func decodeResult(t *testing.T, out string) cliResult {
	t.Helper()
	var r cliResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("stdout is not the result JSON: %v\n%s", err, out)
	}
	return r
}

func TestRunValue(t *testing.T) {
	out, errOut, code := runCLI(t, "print(\"hi\"); 6*7", "run", "-")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	r := decodeResult(t, out)
	if string(r.Value) != "42" || r.Stdout != "hi\n" || r.Failure != nil || len(r.Guarantees) != 10 {
		t.Fatalf("result %+v", r)
	}
}

func TestRunProgramErrorExitsOne(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "prog.py")
	os.WriteFile(prog, []byte("print('kept')\nx = 0\n1 / x\n"), 0o644)
	out, _, code := runCLI(t, "", "run", prog)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	r := decodeResult(t, out)
	if r.Failure == nil || r.Failure.Kind != "program_error" || !strings.Contains(r.Failure.Traceback, "line 3") || r.Stdout != "kept\n" {
		t.Fatalf("result %+v", r)
	}
}

func TestRunUsageAndConfigErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{{"run"}, {"run", "a", "b"}, {"run", "--no-such-flag", "-"}, {"run", "/no/such/file.py"}, {"run", "--run", strings.Repeat("r", 257), "-"}, {"read-output"}, {"read-output", "h_1", "h_2"}, {"no-such-command"}} {
		if _, errOut, code := runCLI(t, "", args...); code != 2 || errOut == "" {
			t.Errorf("%v: exit %d, stderr %q; want 2 with a message", args, code, errOut)
		}
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("profiles:\n  default:\n    hard_limits: {cpu_secs: 3}\n"), 0o644)
	for _, cmd := range []string{"check", "run"} {
		args := []string{cmd, "--config", bad}
		if cmd == "run" {
			args = append(args, "-")
		}
		_, errOut, code := runCLI(t, "1", args...)
		if code != 2 || !strings.Contains(errOut, "cpu_secs") || !strings.Contains(errOut, ":3") {
			t.Errorf("%s with an unknown key: exit %d, stderr %q; want 2 naming the key and line", cmd, code, errOut)
		}
	}
}

func TestRunNarrowsLimits(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte(`profiles:
  default:
    hard_limits: {wall_seconds: 10}
tenants:
  local:
    agents:
      wide: {code_execution: {profile: default, limits: {wall_seconds: 60}}}
      narrow: {code_execution: {profile: default, limits: {wall_seconds: 5}}}
      net: {code_execution: {profile: default, network: unrestricted}}
`), 0o644)
	for agent, want := range map[string]float64{"wide": 10, "narrow": 5} {
		out, errOut, code := runCLI(t, "1", "run", "--config", cfg, "--agent", agent, "-")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", agent, code, errOut)
		}
		if r := decodeResult(t, out); r.Terms.WallSeconds != want {
			t.Errorf("agent %s: wall_seconds %g, want %g", agent, r.Terms.WallSeconds, want)
		}
	}
	marker := filepath.Join(dir, "marker")
	os.Chmod(dir, 0o777)
	out, _, code := runCLI(t, "open("+strconv.Quote(marker)+", 'w')", "run", "--config", cfg, "--agent", "net", "-")
	r := decodeResult(t, out)
	if code != 1 || r.Failure == nil || r.Failure.Kind != "network_unavailable" || r.Failure.Executed {
		t.Fatalf("network request without a grant: exit %d, %+v", code, r.Failure)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("a refused program left its marker on the host")
	}
}

func TestVersionAndHelp(t *testing.T) {
	if out, _, code := runCLI(t, "", "version"); code != 0 || !strings.HasPrefix(out, "mcp-sandbox ") {
		t.Errorf("version: %d %q", code, out)
	}
	// Asked-for help is on stdout, usage first (`mcp-sandbox --help | head -1`), and nothing
	// on stderr; usage beside a mistake stays on stderr.
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		out, errOut, code := runCLI(t, "", args...)
		first, _, _ := strings.Cut(out, "\n")
		if code != 0 || !strings.HasPrefix(first, "Usage: mcp-sandbox <command>") || !strings.Contains(out, "run_code") || errOut != "" {
			t.Errorf("%v: exit %d, first line of stdout %q, stderr %q", args, code, first, errOut)
		}
	}
	for _, tt := range []struct {
		args    []string
		command string
	}{
		{[]string{"run", "--help"}, "run"},
		{[]string{"read-output", "-h"}, "read-output"},
		{[]string{"help", "run"}, "run"},
		{[]string{"check", "--help"}, "check"},
		{[]string{"serve", "--help"}, "serve"},
	} {
		out, errOut, code := runCLI(t, "", tt.args...)
		if code != 0 || !strings.HasPrefix(out, "Usage: mcp-sandbox "+tt.command+" ") || !strings.Contains(out, "--config") || errOut != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", tt.args, code, out, errOut)
		}
	}
	if out, errOut, code := runCLI(t, ""); code != 2 || out != "" || !strings.HasPrefix(errOut, "Usage:") {
		t.Errorf("no command: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if out, errOut, code := runCLI(t, "", "run", "--bogus"); code != 2 || out != "" || !strings.Contains(errOut, "bogus") {
		t.Errorf("run --bogus: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// check validates an A2A peer as it does an MCP upstream: a credential over plaintext http to
// a host that is not loopback is named by its key path.
func TestCheckA2APeer(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	for url, want := range map[string]int{"https://agents.example/inv": 0, "http://127.0.0.1:9/": 0, "http://agents.example/inv": 2} {
		os.WriteFile(cfg, []byte("profiles: {default: {}}\nupstreams:\n  inv: {a2a: {url: '"+url+"', bearer: {env: T}}}\n"+
			"tenants: {local: {upstreams: [inv], agents: {default: {}}}}\n"), 0o644)
		_, errOut, code := runCLI(t, "", "check", "--config", cfg)
		if code != want || want == 2 && !strings.Contains(errOut, "upstreams.inv.a2a.bearer") {
			t.Errorf("check with a2a url %s: exit %d, stderr %q; want %d", url, code, errOut, want)
		}
	}
}

// TestDoctorQuotasAndTasks: doctor reports the quotas in force, the server's and each tenant's,
// with defaults filled, and which clients get run_code as an MCP task, what the others get and
// how long tasks are kept (issue 41), as text and as JSON.
func TestDoctorQuotasAndTasks(t *testing.T) {
	cfg := testkit.WriteConfig(t, `
data_dir: "-"
approvals: {retention_hours: 5}
profiles: {default: {backend: local, isolation: process, allow_same_uid: true}}
quotas: {max_concurrent_executions: 6}
tenants:
  big: {policy: {quotas: {max_concurrent_executions: 5, queue_seconds: 10, max_sessions: 7, max_stored_bytes: 2GiB}}, agents: {a: {}}}
  small: {agents: {a: {}}}
`)
	out, errOut, code := runCLI(t, "", "doctor", "--config", cfg)
	if code != 0 {
		t.Fatalf("doctor: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"server (all tenants) 6 programs at once, 1024 sessions, 8GiB stored",
		"tenant big         5 programs at once (a run waits 10s for a slot), 7 sessions, 2GiB stored",
		"tenant small       4 programs at once (a run waits 60s for a slot), 128 sessions, 1GiB stored",
		"run_code as an MCP task:\n  who:     clients over streamable HTTP that ask for one (2025-11-25: a task field on tools/call; 2026-07-28: the io.modelcontextprotocol/tasks extension)",
		"  asked:   a call needing approval puts the task input_required: 2025-11-25 asks by elicitation on the session, 2026-07-28 through the task (its input request, answered by tasks/update); the operator route answers either",
		"  others:  a client that does not ask, and every client over stdio, gets a plain run_code call that holds its request open until the program ends",
		"  kept:    in this process's private ledger (no data_dir): lost when it exits, at most 5h (approvals.retention_hours)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor does not say %q:\n%s", want, out)
		}
	}
	out, _, _ = runCLI(t, "", "doctor", "--json", "--config", cfg)
	var rep struct {
		Quotas struct {
			Server  map[string]any            `json:"server"`
			Tenants map[string]map[string]any `json:"tenants"`
		} `json:"quotas"`
		Tasks struct {
			Clients, Others, Kept string
			RetentionHours        float64 `json:"retention_hours"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Quotas.Server["max_concurrent_executions"] != 6.0 ||
		rep.Quotas.Tenants["small"]["max_stored_bytes"] != float64(1<<30) || rep.Quotas.Tenants["big"]["queue_seconds"] != 10.0 {
		t.Errorf("doctor --json quotas: %v\n%s", err, out)
	}
	if tk := rep.Tasks; !strings.Contains(tk.Clients, "streamable HTTP") || !strings.Contains(tk.Others, "plain run_code call") ||
		!strings.Contains(tk.Kept, "private ledger") || tk.RetentionHours != 5 {
		t.Errorf("doctor --json tasks: %+v\n%s", tk, out)
	}
}

func TestVersionFlag(t *testing.T) {
	want, _, _ := runCLI(t, "", "version")
	for _, args := range [][]string{{"--version"}, {"-V"}} {
		if out, errOut, code := runCLI(t, "", args...); code != 0 || out != want || !strings.HasPrefix(out, "mcp-sandbox ") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want what version prints (%q)", args, code, out, errOut, want)
		}
	}
}

func TestUnknownCommandSuggestsTheNearest(t *testing.T) {
	for typo, want := range map[string]string{"serv": "serve", "chek": "check", "doctr": "doctor", "versoin": "version", "--verison": "--version"} {
		_, errOut, code := runCLI(t, "", typo)
		if code != 2 || !strings.Contains(errOut, `did you mean "`+want+`"?`) {
			t.Errorf("%s: exit %d, stderr %q; want 2 and a suggestion of %q", typo, code, errOut, want)
		}
	}
	if _, errOut, _ := runCLI(t, "", "xyzzy-frobnicate"); strings.Contains(errOut, "did you mean") {
		t.Errorf("a name close to nothing got a suggestion: %q", errOut)
	}
}

func TestCheckWarnsAboutAnUpstreamCommandThatDoesNotExist(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte(`profiles: {default: {}}
upstreams:
  gone: {command: ["./bin/no-such-server"]}
  typo: {command: ["no-such-command-mcp-sandbox-test", "--stdio"]}
  fine: {command: ["sh", "-c", "exit 0"]}
tenants:
  t: {upstreams: [gone, typo, fine], agents: {a: {code_execution: {}}}}
`), 0o644)
	out, errOut, code := runCLI(t, "", "check", "--config", cfg)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q: a missing command is a warning, not an invalid config", code, errOut)
	}
	for _, want := range []string{"upstreams.gone.command", filepath.Join(dir, "bin", "no-such-server"), "upstreams.typo.command", "no-such-command-mcp-sandbox-test", "not found"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr %q does not mention %q", errOut, want)
		}
	}
	if strings.Contains(errOut, "upstreams.fine") || !strings.Contains(out, "valid") {
		t.Errorf("stdout %q, stderr %q", out, errOut)
	}
}

// doctor never prints an empty level or a zero ceiling, even for a profile that could not
// start anything.
func TestDoctorOnAProfileThatCannotStart(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(cfg, []byte(`profiles:
  default: {backend: process, python: /no/such/python3, hard_limits: {cpu_seconds: 3}}
tenants:
  t: {agents: {a: {code_execution: {}}}}
`), 0o644)
	out, errOut, code := runCLI(t, "", "doctor", "--config", cfg)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (not ready)\n%s%s", code, out, errOut)
	}
	for _, bad := range []string{"isolation ,", " 0s", " 0 bytes", " 0 processes", "mechanisms: \n"} {
		if strings.Contains(out, bad) {
			t.Errorf("doctor prints %q:\n%s", bad, out)
		}
	}
	for _, want := range []string{"NOT READY", "cpu 3s", "/no/such/python3"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor does not say %q:\n%s", want, out)
		}
	}
}

// run --limit narrows the agent's terms for one program as its spec would: a sleeper under
// --limit wall_seconds=2 is killed by that wall clock, and the terms say 2. A wider value, an
// unknown key and a malformed one are usage errors that say why.
func TestRunLimitNarrows(t *testing.T) {
	out, errOut, code := runCLI(t, "import time\nprint('started', flush=True)\ntime.sleep(600)\n",
		"run", "--limit", "wall_seconds=2", "--limit", "memory_bytes=256MiB", "-")
	if code != 1 {
		t.Fatalf("exit %d, want 1 (a failure)\n%s\n%s", code, out, errOut)
	}
	var r struct {
		Stdout   string  `json:"stdout"`
		LimitHit *string `json:"limit_hit"`
		Failure  *struct {
			Kind string `json:"kind"`
		} `json:"failure"`
		Terms struct {
			WallSeconds float64 `json:"wall_seconds"`
			MemoryBytes int64   `json:"memory_bytes"`
		} `json:"terms"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if r.Failure == nil || r.Failure.Kind != "timeout" || r.LimitHit == nil || *r.LimitHit != "wall_seconds" {
		t.Errorf("failure %+v, limit_hit %v: want timeout, wall_seconds", r.Failure, r.LimitHit)
	}
	if r.Terms.WallSeconds != 2 || r.Terms.MemoryBytes != 256<<20 {
		t.Errorf("terms wall_seconds %v, memory_bytes %d: want 2 and 256MiB", r.Terms.WallSeconds, r.Terms.MemoryBytes)
	}
	if r.Stdout != "started\n" {
		t.Errorf("stdout %q: the program did not run", r.Stdout)
	}
	for _, tt := range []struct{ limit, want string }{
		{"wall_seconds=3600", "would widen this agent's wall_seconds of 30s"},
		{"process_count=100000", "would widen"},
		{"wall_second=2", `did you mean "wall_seconds"?`},
		{"memory_bytes=lots", "want a positive size"},
		{"wall_seconds", "want KEY=VALUE"},
	} {
		out, errOut, code := runCLI(t, "1", "run", "--limit", tt.limit, "-")
		if code != 2 || out != "" || !strings.Contains(errOut, tt.want) {
			t.Errorf("--limit %s: exit %d, stdout %q, stderr %q; want exit 2 saying %q", tt.limit, code, out, errOut, tt.want)
		}
	}
}

// TestImageBuildUsage: `image build` teaches in --help (each kind and the image it makes) and
// refuses a mistake with exit 2 naming it, before any runtime is run.
func TestImageBuildUsage(t *testing.T) {
	out, _, code := runCLI(t, "", "image", "build", "--help")
	if code != 0 {
		t.Fatalf("image build --help: exit %d", code)
	}
	testkit.Mentions(t, "image build --help", out, []string{"--runtime", "--python", "--tag", "--image",
		"(localhost/mcp-sandbox-server)", "(localhost/mcp-sandbox-worker)", "localhost/mcp-sandbox-python:latest", "Nothing is pulled"})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"image"}, "names no subcommand"},
		{[]string{"image", "make"}, `unknown subcommand "make"`},
		{[]string{"image", "build", "--image", "client"}, `--image must be sandbox, server or worker, got "client"`},
		{[]string{"image", "build", "--tag", "Bad Name"}, `--tag "Bad Name" is not an image reference`},
		{[]string{"image", "build", "--runtime", "no-such-runtime"}, `--runtime "no-such-runtime" is not on PATH`},
	} {
		_, errOut, code := runCLI(t, "", c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("mcp-sandbox %s: exit %d, stderr %q; want 2 and %q", strings.Join(c.args, " "), code, errOut, c.want)
		}
	}
}
