//go:build linux

package benchmarks

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/launch"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// TestReportRunColdStart prints what `mcp-sandbox run` of `pass` costs beside a bare
// `python3 -I -c pass`, each started in turn in the same loop: wall time, and CPU time (user
// and system, of the command and every process it waited for) as a second figure that the
// machine's load moves less. Beside them, the binary's own start, package initialisers
// included: `mcp-sandbox --version`, and the init helper as a sandbox child starts it (the
// helper alone, which the binary embeds and the server execs, and the whole binary, which a
// build without the helper execs instead) with a trial spec, which exits as soon as it is up;
// and, as the floor any Go binary starts from, a Go program that only exits (built here). The embedded default
// config is used at the isolated level this host reaches (namespaces as root) and, with the
// kernel boundaries disabled, at the process level; the data dir is a fresh one, its
// interpreter cache filled by the first (unmeasured) runs.
func TestReportRunColdStart(t *testing.T) {
	sandbox := testkit.Binary(t)
	prog := filepath.Join(t.TempDir(), "pass.py")
	if err := os.WriteFile(prog, []byte("pass\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	floor := goProgramThatOnlyExits(t)
	helper := embeddedHelper(t, sandbox, state)
	type subject struct {
		name      string
		argv, env []string
		wall, cpu []time.Duration
	}
	subjects := []*subject{
		{name: "bare /usr/bin/python3 -I -c pass (baseline)", argv: []string{"/usr/bin/python3", "-I", "-c", "pass"}},
		{name: "mcp-sandbox --version (the binary's start)", argv: []string{sandbox, "--version"}},
		{name: "init helper alone, trial spec (its start)", argv: []string{helper, launch.Command},
			env: []string{launch.SpecEnv + `={"trial":true}`}},
		{name: "the whole binary as init helper, trial spec", argv: []string{sandbox, launch.Command},
			env: []string{launch.SpecEnv + `={"trial":true}`}},
		{name: "a Go program that only exits (any Go binary's floor)", argv: []string{floor}},
		{name: "mcp-sandbox run pass.py (default: strongest backend)", argv: []string{sandbox, "run", prog}},
		{name: "mcp-sandbox run pass.py (process level)", argv: []string{sandbox, "run", prog},
			env: []string{"MCP_SANDBOX_DISABLE=namespaces,bwrap"}},
	}
	n := 10
	if *report {
		n = 60
	}
	for i := 0; i < n+3; i++ {
		for _, s := range subjects {
			cmd := exec.Command(s.argv[0], s.argv[1:]...)
			cmd.Env = append(append(os.Environ(), "XDG_STATE_HOME="+state), s.env...)
			start := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", s.name, err, out)
			}
			wall := time.Since(start)
			ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
			cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
			if i >= 3 { // the first runs fill the caches
				s.wall, s.cpu = append(s.wall, wall), append(s.cpu, cpu)
			}
		}
	}
	bw, bc := median(subjects[0].wall), median(subjects[0].cpu)
	out := fmt.Sprintf("one-shot run of `pass` beside a bare interpreter start, median of %d in turn (load average %s)\n", n, loadAverage()) +
		fmt.Sprintf("  %-54s %9s %6s   %9s %6s\n", "", "wall", "ratio", "cpu", "ratio")
	for _, s := range subjects {
		w, c := median(s.wall), median(s.cpu)
		out += fmt.Sprintf("  %-54s %9s %5.2fx   %9s %5.2fx\n", s.name, w.Round(10*time.Microsecond), float64(w)/float64(bw),
			c.Round(10*time.Microsecond), float64(c)/float64(bc))
	}
	out += "  (cpu: the command's and its waited-for descendants'; a sandbox child killed at the end is not counted)\n" +
		"  target: mcp-sandbox run of pass <= 2.2x a bare start's wall\n"
	t.Log(out)
	fmt.Fprintln(os.Stderr, out)
}

// embeddedHelper is the init helper the binary sandbox execs for its children, as its doctor
// reports it (the helper alone, embedded), or t fails.
func embeddedHelper(t *testing.T, sandbox, state string) string {
	t.Helper()
	cmd := exec.Command(sandbox, "doctor", "--json")
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state)
	out, _ := cmd.Output() // doctor exits 1 when a profile is not ready; the helper is reported either way
	var doc struct {
		Helper struct {
			Path     string `json:"path"`
			Embedded bool   `json:"embedded"`
			Why      string `json:"why"`
		} `json:"init_helper"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, out)
	}
	if !doc.Helper.Embedded {
		t.Fatalf("the binary embeds no init helper: %s", doc.Helper.Why)
	}
	return doc.Helper.Path
}

// goProgramThatOnlyExits builds, in a module of its own, a Go program whose main returns at
// once, and returns its path.
func goProgramThatOnlyExits(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range map[string]string{
		"go.mod":  "module floor\n\ngo 1.26\n",
		"main.go": "package main\n\nfunc main() {}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "floor")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building a Go program that only exits: %v\n%s", err, out)
	}
	return bin
}
