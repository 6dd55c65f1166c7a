//go:build linux

package jobobject

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
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

// WinePythonEnv names the directory of a Windows CPython (python.exe and its DLLs, Lib),
// which .ci/wine/python.sh unpacks from python-build-standalone's windows-amd64 build.
const WinePythonEnv = "MCP_SANDBOX_WINE_PYTHON"

// wineResult is what the tests read of `mcp-sandbox run`'s result.
type wineResult struct {
	Value   json.RawMessage `json:"value"`
	Stdout  string          `json:"stdout"`
	Stderr  string          `json:"stderr"`
	Failure *struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	} `json:"failure"`
	LimitHit   *string           `json:"limit_hit"`
	Duration   float64           `json:"duration_seconds"`
	Guarantees map[string]string `json:"guarantees"`
	// Fallback says why local runs at the process level: no container engine answers.
	Fallback string `json:"isolation_fallback"`
}

// wineRun runs mcp-sandbox.exe under Wine with the jobobject backend (backend: local, which
// on Windows is it) and the Windows CPython.
type wineRun struct {
	wine, prefix, exe, python, dir string
}

func (w *wineRun) run(t *testing.T, name, program, limits string) wineResult {
	t.Helper()
	cfg := filepath.Join(w.dir, name+".yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
profiles:
  default: {backend: local, isolation: process, python: '%s', hard_limits: {%s}}
tenants:
  local: {agents: {default: {code_execution: {profile: default, isolation: process}}}}
`, w.python, limits)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(w.wine, w.exe, "run", "--config", cfg, "-")
	cmd.Dir = w.dir
	cmd.Env = append(os.Environ(), "WINEPREFIX="+w.prefix, "WINEDEBUG=-all")
	cmd.Stdin = strings.NewReader(program)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var res wineResult
	if jerr := json.Unmarshal(out, &res); jerr != nil {
		t.Fatalf("%s: mcp-sandbox.exe run: %v, result %v\nstdout %s\nstderr %s", name, err, jerr, out, stderr.String())
	}
	t.Logf("%s: %.1fs, failure %+v, limit_hit %v, guarantees %v", name, res.Duration, res.Failure, deref(res.LimitHit), res.Guarantees)
	// What a job is not, and what always applies, whatever held.
	for dim, want := range map[string]string{"identity": "unavailable", "filesystem": "unavailable", "file_size": "unavailable", "wall_clock": "enforced"} {
		if got := res.Guarantees[dim]; got != want {
			t.Errorf("%s: %s graded %q, want %q", name, dim, got, want)
		}
	}
	return res
}

// doctor runs mcp-sandbox.exe doctor on the config of the run named name, under Wine with no
// container engine reachable: it must say none answers, that the isolated level waits for
// one, and that local falls back to the process level, which it describes.
func (w *wineRun) doctor(t *testing.T, name string) {
	t.Helper()
	cmd := exec.Command(w.wine, w.exe, "doctor", "--config", filepath.Join(w.dir, name+".yaml"))
	cmd.Dir = w.dir
	cmd.Env = append(os.Environ(), "WINEPREFIX="+w.prefix, "WINEDEBUG=-all")
	out, err := cmd.Output()
	text := string(out)
	t.Logf("mcp-sandbox.exe doctor (%v):\n%s", err, text)
	for _, want := range []string{"container engine (the isolated level here):", "engine   none answers: no container runtime answers here",
		"podman: not installed", "docker: not installed", "isolated unavailable until an engine answers with the image",
		"process  jobobject: a Job Object per program", "falls back to it when no engine answers",
		"profile default: backend jobobject", "fallback: programs run at the process level (jobobject)"} {
		if !strings.Contains(text, want) {
			t.Errorf("mcp-sandbox.exe doctor does not say %q", want)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}

// winPath is path as Wine's Z: drive names it.
func winPath(path string) string { return `Z:` + strings.ReplaceAll(path, "/", `\`) }

// TestRunUnderWine: mcp-sandbox.exe run under Wine 8 runs Python programs in a Job Object
// with the Windows CPython: print(42) returns 42; a busy loop is killed at its CPU limit; a
// program that starts children is killed with its whole tree at the wall clock (no process
// of it is left on this host); and every guarantee a result grades enforced held against a
// hostile case (a cpu limit that ended the busy loop, a tree that died, an allocation and
// process starts past their limits refused, an environment of only the allowed names, no
// reaching a loopback listener), while what Wine does not enforce is graded below it.
// Two overlapping binding calls cross the loopback channel (the selector event loop).
// Waits derive from the measured start of the Windows CPython under Wine.
func TestRunUnderWine(t *testing.T) {
	wine, err := exec.LookPath("wine64")
	if err != nil {
		wine = "/usr/lib/wine/wine64"
	}
	prefix, py := os.Getenv(WinePrefixEnv), os.Getenv(WinePythonEnv)
	_, wineErr := os.Stat(wine)
	_, shimErr := os.Stat(filepath.Join(prefix, "drive_c", "windows", "system32", "bcryptprimitives.dll"))
	_, pyErr := os.Stat(filepath.Join(py, "python.exe"))
	gate.Require(t, "wine", wineErr == nil && prefix != "" && shimErr == nil && py != "" && pyErr == nil,
		"needs wine64, "+WinePrefixEnv+" naming a prefix with the Go runtime's bcryptprimitives.dll shim and "+
			WinePythonEnv+" naming a Windows CPython's directory, as .ci/run prepares (.ci/wine/python.sh)")
	gate.Hostile(t)
	prefix = testkit.OwnWinePrefix(t, prefix)
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command, to build mcp-sandbox.exe: %v", err)
	}
	dir := t.TempDir()
	w := &wineRun{wine: wine, prefix: prefix, exe: filepath.Join(dir, "mcp-sandbox.exe"), python: winPath(filepath.Join(py, "python.exe")), dir: dir}
	build := exec.Command(goBin, "build", "-o", w.exe, "github.com/mcp-sandbox/mcp-sandbox/cmd/mcp-sandbox")
	build.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building mcp-sandbox.exe: %v\n%s", err, out)
	}

	// What one start of the Windows CPython costs under Wine on this machine, as loaded as it
	// is: the baseline of the waits below. Only its stdout and exit status are judged: Wine
	// itself writes to stderr now and then on a prefix's first start ("Unhandled page fault
	// … starting debugger" from one of its own threads, the program's 42 printed and its
	// exit status 0, seen in CI), which says nothing of CPython or of us.
	start := time.Now()
	first := exec.Command(wine, filepath.Join(py, "python.exe"), "-I", "-c", "print(42)")
	first.Env = append(os.Environ(), "WINEPREFIX="+prefix, "WINEDEBUG=-all")
	var firstErr strings.Builder
	first.Stderr = &firstErr
	if out, err := first.Output(); err != nil || strings.TrimSpace(string(out)) != "42" {
		t.Fatalf("the Windows CPython under Wine: %v, stdout %q, stderr %q", err, out, firstErr.String())
	} else if firstErr.Len() > 0 {
		t.Logf("Wine's stderr on the baseline start: %q", firstErr.String())
	}
	baseline := time.Since(start).Seconds()
	t.Logf("one start of python.exe under Wine: %.1fs", baseline)

	res := w.run(t, "print42", "print(42)\n", "")
	if res.Failure != nil || strings.TrimSpace(res.Stdout) != "42" {
		t.Fatalf("print(42): stdout %q, failure %+v, stderr %q", res.Stdout, res.Failure, res.Stderr)
	}
	// No container engine answers under Wine (no docker.exe or podman.exe on its PATH): local
	// fell back to the process level and the result says why; doctor says which engine it
	// looked for and offers the process level.
	if !strings.Contains(res.Fallback, "process level (jobobject)") || !strings.Contains(res.Fallback, "not installed") {
		t.Errorf("print(42) ran at the process level without an engine, yet isolation_fallback is %q", res.Fallback)
	}
	w.doctor(t, "print42")
	// A wall clock of a few interpreter starts, stretched by gate.Scaled where nothing but a
	// failure waits for it.
	wall := func(times float64) int { return int(times*baseline) + 20 }

	// A busy loop: killed at its CPU limit, by the job or the host's meter; cpu is graded
	// enforced or unverified only because it was.
	res = w.run(t, "busy", "print('spinning', flush=True)\nwhile True:\n    pass\n",
		fmt.Sprintf("cpu_seconds: 2, wall_seconds: %d", int(gate.Scaled(time.Duration(wall(10))*time.Second).Seconds())))
	if res.Failure == nil || res.Failure.Kind != "limit_exceeded" || deref(res.LimitHit) != "cpu_seconds" {
		t.Errorf("a busy loop: failure %+v, limit_hit %s; want limit_exceeded at cpu_seconds", res.Failure, deref(res.LimitHit))
	} else if !strings.Contains(res.Stdout, "spinning") {
		t.Errorf("a busy loop: what it printed before the kill is lost: %q", res.Stdout)
	}
	if g := res.Guarantees["cpu"]; g != "enforced" && g != "unverified" {
		t.Errorf("the CPU limit ended the busy loop, yet cpu is graded %q", g)
	}

	// A tree: two children that sleep, started before the program sleeps itself; the wall
	// clock ends the execution, and with it every process of the job.
	var b [8]byte
	_, _ = rand.Read(b[:])
	marker := "mcps-tree-" + hex.EncodeToString(b[:])
	tree := fmt.Sprintf(`import subprocess, sys, time
kids = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)", %q]) for _ in range(2)]
print("children", len(kids), flush=True)
time.sleep(3600)
`, marker)
	res = w.run(t, "tree", tree, fmt.Sprintf("wall_seconds: %d", wall(6)))
	if res.Failure == nil || res.Failure.Kind != "timeout" || deref(res.LimitHit) != "wall_seconds" {
		t.Errorf("a tree: failure %+v, limit_hit %s; want a timeout at wall_seconds", res.Failure, deref(res.LimitHit))
	}
	if !strings.Contains(res.Stdout, "children 2") {
		t.Fatalf("the program did not start its children before its wall clock: stdout %q, stderr %q", res.Stdout, res.Stderr)
	}
	left := survivors(marker)
	for deadline := time.Now().Add(gate.Scaled(30 * time.Second)); len(left) > 0 && time.Now().Before(deadline); left = survivors(marker) {
		time.Sleep(100 * time.Millisecond) // a killed process's exit, seen from /proc
	}
	if len(left) > 0 {
		t.Errorf("processes of the tree outlived the execution: %v (process_tree graded %q)", left, res.Guarantees["process_tree"])
		for _, p := range left {
			_ = p.Kill()
		}
	}
	if g := res.Guarantees["process_tree"]; g != "enforced" {
		t.Errorf("the tree died with the job, yet process_tree is graded %q", g)
	}

	// The rest of the contract suite's hostile cases, each against the grade that claims it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	hostile := fmt.Sprintf(`import asyncio, os, socket, subprocess, sys
out = {"env": sorted(os.environ)}
out["bindings"] = await asyncio.gather(list_tools(), list_tools())
try:
    block = bytearray(4 * 64 * 1024 * 1024)
    out["memory"] = "committed"
    del block
except MemoryError:
    out["memory"] = "refused"
started = []
for _ in range(3):
    try:
        started.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"]))
    except OSError:
        pass
out["started"] = len(started)
try:
    socket.create_connection(("127.0.0.1", %d), timeout=10).close()
    out["reached"] = True
except OSError:
    out["reached"] = False
out
`, ln.Addr().(*net.TCPAddr).Port)
	res = w.run(t, "hostile", hostile, fmt.Sprintf("memory_bytes: 64MiB, process_count: 2, wall_seconds: %d", int(gate.Scaled(time.Duration(wall(10))*time.Second).Seconds())))
	var seen struct {
		Bindings []map[string]any `json:"bindings"`
		Env      []string         `json:"env"`
		Memory   string           `json:"memory"`
		Started  int              `json:"started"`
		Reached  bool             `json:"reached"`
	}
	if res.Failure != nil || json.Unmarshal(res.Value, &seen) != nil || seen.Memory == "" {
		t.Fatalf("the hostile cases: value %s, failure %+v, stderr %q", res.Value, res.Failure, res.Stderr)
	}
	if len(seen.Bindings) != 2 || seen.Bindings[0]["tools"] == nil || seen.Bindings[1]["tools"] == nil {
		t.Errorf("two overlapping calls of list_tools over the loopback channel returned %v", seen.Bindings)
	}
	t.Logf("under Wine: an allocation of 4x memory_bytes %s, %d of 3 children started at process_count 2, loopback reached %v, environment %v",
		seen.Memory, seen.Started, seen.Reached, seen.Env)
	allowed := []string{"HOME", "TMPDIR", "PATH", "PYTHONDONTWRITEBYTECODE", "LC_CTYPE"}
	for _, c := range []struct {
		dim  string
		held bool
	}{
		{"memory", seen.Memory == "refused"},
		{"process_count", seen.Started <= 1},
		{"network", !seen.Reached},
		{"environment", !slices.ContainsFunc(seen.Env, func(n string) bool { return !slices.Contains(allowed, n) })},
	} {
		if res.Guarantees[c.dim] == "enforced" && !c.held {
			t.Errorf("%s is graded enforced, but its hostile case got through", c.dim)
		}
	}
	if res.Guarantees["environment"] != "enforced" {
		t.Errorf("environment graded %q: the bootstrap keeps only the variables it was given", res.Guarantees["environment"])
	}
}

// survivors are the processes of this host (the tests' pid namespace) whose command line
// holds marker.
func survivors(marker string) []*os.Process {
	var out []*os.Process
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), marker) {
			if p, err := os.FindProcess(pid); err == nil {
				out = append(out, p)
			}
		}
	}
	return out
}
