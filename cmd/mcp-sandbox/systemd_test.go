package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// unitPath is the systemd unit deploy/ ships.
const unitPath = "../../deploy/systemd/mcp-sandbox.service"

// unitBinary is where the unit expects the binary.
const unitBinary = "/usr/local/bin/mcp-sandbox"

// unitDirective returns the values of key in the unit (comments and blank lines skipped).
func unitDirective(t *testing.T, key string) []string {
	t.Helper()
	b, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), key+"="); ok {
			out = append(out, v)
		}
	}
	return out
}

// TestSystemdUnitVerifies: `systemd-analyze verify` accepts the unit without a word (it
// exits 0 on an unknown key or system call group, so any output fails the test), with the
// binary where the unit names it (here: the built one, copied into the unit), and the
// built binary accepts every flag of ExecStart.
func TestSystemdUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	gate.Require(t, "systemd", err == nil, "systemd-analyze is not installed (Debian: apt-get install systemd)")
	b, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "ExecStart="+unitBinary+" ") {
		t.Fatalf("ExecStart does not start %s", unitBinary)
	}
	unit := filepath.Join(t.TempDir(), "mcp-sandbox.service")
	if err := os.WriteFile(unit, []byte(strings.ReplaceAll(string(b), unitBinary, testkit.Binary(t))), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", unit).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}

	start := unitDirective(t, "ExecStart")
	if len(start) != 1 {
		t.Fatalf("ExecStart: %q", start)
	}
	args := strings.Fields(start[0])[1:]
	if o, e, code := runCLI(t, "", append(args, "--help")...); code != 0 {
		t.Errorf("the built binary refuses ExecStart's flags %q: exit %d\n%s%s", args, code, o, e)
	}
}

// TestSystemdUnitSandboxWorks runs a program on the namespaces backend, and one on the
// process backend, the way the unit starts the server: root with the unit's capability
// bounding set (every other capability gone, none inheritable) and no_new_privs. Each
// completes with every guarantee enforced that its level offers and its artifact collected,
// and a program past its wall clock is killed in time.
func TestSystemdUnitSandboxWorks(t *testing.T) {
	setpriv, err := exec.LookPath("setpriv")
	gate.Require(t, "root", os.Geteuid() == 0, "the unit runs the server as root with a narrowed bounding set")
	gate.Require(t, "setpriv", err == nil, "setpriv (util-linux) is not installed")
	bound := unitDirective(t, "CapabilityBoundingSet")
	if len(bound) != 1 {
		t.Fatalf("CapabilityBoundingSet: %q", bound)
	}
	set := "-all"
	for _, c := range strings.Fields(bound[0]) {
		set += ",+" + strings.ToLower(strings.TrimPrefix(c, "CAP_"))
	}
	if nnp := unitDirective(t, "NoNewPrivileges"); len(nnp) != 1 || nnp[0] != "yes" {
		t.Fatalf("NoNewPrivileges: %q", nnp)
	}
	for _, c := range []struct{ backend, level string }{{"namespaces", "isolated"}, {"process", "process"}} {
		t.Run(c.backend, func(t *testing.T) {
			cfg := testkit.WriteConfig(t, `
data_dir: "-"
profiles:
  default:
    backend: `+c.backend+`
    isolation: `+c.level+`
    hard_limits: {wall_seconds: 3}
tenants:
  local:
    agents:
      default: {code_execution: {profile: default}}
`)
			run := func(program string) (cliResult, map[string]any, time.Duration) {
				t.Helper()
				cmd := exec.Command(setpriv, "--no-new-privs", "--bounding-set", set, "--inh-caps=-all", "--",
					testkit.Binary(t), "run", "--config", cfg, "-")
				cmd.Stdin = strings.NewReader(program)
				var stderr strings.Builder
				cmd.Stderr = &stderr
				began := time.Now()
				out, _ := cmd.Output()
				took := time.Since(began)
				var full map[string]any
				if err := json.Unmarshal(out, &full); err != nil {
					t.Fatalf("no result: %v\n%s\n%s", err, out, stderr.String())
				}
				return decodeResult(t, string(out)), full, took
			}
			r, full, _ := run("import os\nopen('made.txt', 'w').write('x')\nos.getuid()")
			if r.Failure != nil {
				t.Fatalf("refused or failed under the unit's capabilities: %s: %s", r.Failure.Kind, r.Failure.Message)
			}
			if string(r.Value) != "65534" || full["isolation"] != c.level {
				t.Errorf("ran as %s at %v, want 65534 at %s", r.Value, full["isolation"], c.level)
			}
			for g, grade := range r.Guarantees {
				if grade != "enforced" && !(c.level == "process" && (g == "filesystem" || g == "network")) {
					t.Errorf("guarantee %s is %s under the unit's capabilities", g, grade)
				}
			}
			if arts, _ := full["artifacts"].([]any); len(arts) != 1 {
				t.Errorf("artifacts %v, omitted %v: want made.txt", full["artifacts"], full["artifacts_omitted"])
			}
			r, _, took := run("while True: pass")
			if r.Failure == nil || r.Failure.Kind != "timeout" || took > 20*time.Second {
				t.Errorf("a program past its wall clock: %+v after %v, want timeout soon after 3 s", r.Failure, took)
			}
		})
	}
}

// TestWithoutCapKillTeardownIsBounded: a server that is root but lacks CAP_KILL (an
// operator's unit that narrowed the bounding set further) cannot signal the sandbox
// identity's processes, and the process backend's tree kill here rests on kill(2) (a v1
// cgroup, or the subreaper). It used to wait for ever: for a warm child at shutdown, and for
// a program past its wall clock that ignores the channel's end. Now every wait is bounded,
// process_tree is graded unavailable from the start, the log names CAP_KILL, and the program
// that outlived its kill is a failure that says why. Each run is in a pid namespace of its
// own (unshare), whose end takes the survivor with it.
func TestWithoutCapKillTeardownIsBounded(t *testing.T) {
	setpriv, err := exec.LookPath("setpriv")
	gate.Require(t, "root", os.Geteuid() == 0, "the case is a root server without CAP_KILL")
	gate.Require(t, "setpriv", err == nil, "setpriv (util-linux) is not installed")
	unshare, err := exec.LookPath("unshare")
	gate.Require(t, "unshare", err == nil, "unshare (util-linux) is not installed")
	set := "-all" // the unit's bounding set without CAP_KILL
	for _, c := range strings.Fields(unitDirective(t, "CapabilityBoundingSet")[0]) {
		if c != "CAP_KILL" {
			set += ",+" + strings.ToLower(strings.TrimPrefix(c, "CAP_"))
		}
	}
	cfg := testkit.WriteConfig(t, `
data_dir: "-"
profiles:
  default:
    backend: process
    isolation: process
    hard_limits: {wall_seconds: 3}
tenants:
  local:
    agents:
      default: {code_execution: {profile: default}}
`)
	run := func(program string) (cliResult, string, time.Duration) {
		t.Helper()
		cmd := exec.Command(unshare, "--pid", "--fork", "--kill-child", "--mount-proc", setpriv, "--no-new-privs",
			"--bounding-set", set, "--inh-caps=-all", "--", testkit.Binary(t), "run", "--config", cfg, "-")
		cmd.Stdin = strings.NewReader(program)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		cmd.WaitDelay = time.Second
		began := time.Now()
		timer := time.AfterFunc(90*time.Second, func() { _ = cmd.Process.Kill() }) // kills the namespace
		out, _ := cmd.Output()
		timer.Stop()
		took := time.Since(began)
		if len(out) == 0 {
			t.Fatalf("no result after %v (killed at 90 s):\n%s", took, stderr.String())
		}
		return decodeResult(t, string(out)), stderr.String(), took
	}

	r, logs, took := run("6*7")
	if r.Failure != nil || string(r.Value) != "42" {
		t.Errorf("a clean program without CAP_KILL: %s %+v", r.Value, r.Failure)
	}
	if r.Guarantees["process_tree"] != "unavailable" {
		t.Errorf("process_tree %q without CAP_KILL, want unavailable", r.Guarantees["process_tree"])
	}
	if !strings.Contains(logs, "lacks CAP_KILL") {
		t.Errorf("no log line names the missing CAP_KILL:\n%s", logs)
	}
	if took > 20*time.Second {
		t.Errorf("the server took %v to end after a clean program (its warm child could not be killed)", took)
	}

	r, _, took = run("import signal, time\nsignal.signal(signal.SIGIO, signal.SIG_IGN)\ntime.sleep(300)")
	if r.Failure == nil || r.Failure.Kind != "timeout" || !strings.Contains(r.Failure.Message, "CAP_KILL") {
		t.Errorf("a program past its wall clock that SIGKILL cannot reach: %+v, want a timeout that names CAP_KILL", r.Failure)
	}
	if r.Guarantees["process_tree"] != "unavailable" {
		t.Errorf("process_tree %q for a program that outlived its kill", r.Guarantees["process_tree"])
	}
	if took > 30*time.Second {
		t.Errorf("a program SIGKILL cannot reach held the server %v (wall clock 3 s)", took)
	}
}
