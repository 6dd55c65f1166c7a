//go:build windows

package jobobject

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"golang.org/x/sys/windows"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ChildArg {
		os.Exit(ChildMain(os.Args[2:], os.Stdout))
	}
	os.Exit(m.Run())
}

func TestConstantsAreWindows(t *testing.T) {
	for _, c := range []struct{ ours, theirs uint32 }{
		{limitJobTime, windows.JOB_OBJECT_LIMIT_JOB_TIME}, {limitActiveProcess, windows.JOB_OBJECT_LIMIT_ACTIVE_PROCESS},
		{limitJobMemory, windows.JOB_OBJECT_LIMIT_JOB_MEMORY}, {limitKillOnJobClose, windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE},
		{limitDieOnUnhandledException, windows.JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION},
	} {
		if c.ours != c.theirs {
			t.Errorf("flag %#x, windows says %#x", c.ours, c.theirs)
		}
	}
}

func self(t *testing.T) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A program started in a job runs (suspended, assigned, resumed), its output arrives, and
// the job reports its end.
func TestStartInAJob(t *testing.T) {
	for _, restricted := range []bool{false, true} {
		j, err := New(LimitsFor(engine.DefaultLimits))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(self(t), ChildArg, "print42")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Start(cmd, &StartOptions{RestrictedToken: restricted}); err != nil {
			j.Close()
			if restricted {
				t.Logf("a restricted token: %v", err)
				continue
			}
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		if err := cmd.Wait(); err != nil || strings.TrimSpace(line) != "42" {
			t.Errorf("restricted token %v: output %q, %v; want 42", restricted, line, err)
		}
		a, err := j.Account()
		if err != nil || a.TotalProcesses != 1 {
			t.Errorf("restricted token %v: the job counted %+v (%v); want the one process", restricted, a, err)
		}
		j.Close()
	}
}

// Probe's grades are what its hostile cases showed: each guarantee claimed enforced held
// against its hostile child, each that did not is unavailable, and the reason is said.
func TestProbe(t *testing.T) {
	e := Probe(context.Background(), self(t), gate.Scaled(20*time.Second))
	t.Logf("enforced here: kill-on-close %v, cpu %v (the host's meter: %v), memory %v, process count %v", e.KillOnClose, e.CPU, e.CPUMeter, e.Memory, e.ProcessCount)
	for _, n := range e.Notes {
		t.Logf("not enforced: %s", n)
	}
	g := e.Grades()
	for _, c := range []struct {
		d    engine.Dimension
		held bool
	}{{engine.DimProcessTree, e.KillOnClose}, {engine.DimCPU, e.CPU}, {engine.DimMemory, e.Memory}, {engine.DimProcessCount, e.ProcessCount}} {
		if (g.Get(c.d) == engine.Enforced) != c.held {
			t.Errorf("%s graded %s, but its hostile case held=%v", c.d, g.Get(c.d), c.held)
		}
	}
	if want := 4 - btoi(e.KillOnClose) - btoi(e.CPU) - btoi(e.Memory) - btoi(e.ProcessCount); len(e.Notes) != want {
		t.Errorf("%d notes for %d limits not enforced: %q", len(e.Notes), want, e.Notes)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
