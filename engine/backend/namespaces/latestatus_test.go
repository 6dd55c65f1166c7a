//go:build linux

package namespaces_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/namespaces"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// TestLateExitStatus: an interpreter that ended is told from one that closed its channel and
// runs on, however late its exit status comes (docs/design.md §4.6). What reaps the
// interpreter and reports its status (a forked child's template, an exec'd child's init) is
// stopped while the program ends, as a busy host may leave it unscheduled, and resumed well
// after the host's grace for a channel's end: the result is still the program's own exit,
// never a protocol_violation. A forked child that sent done and was killed while its template
// is stopped reads as the program's error, its tree not escaped, before the template is
// resumed: the child's death is what counts, not the template's report of it. (The contract
// suite's "closes its channel" case holds that a child that runs on is still ended promptly.)
func TestLateExitStatus(t *testing.T) {
	exit3 := "import os\nos._exit(3)"
	t.Run("forked", func(t *testing.T) {
		r := forkAllRunner(t)
		forked := func(cmdline, parent []byte) bool {
			return bytes.Contains(cmdline, []byte(templateLine)) && bytes.Contains(parent, []byte(templateLine))
		}
		res := reaperStopped(t, r, "1 / 0", forked, false)
		wantForked(t, res)
		if res.Failure == nil || res.Failure.Kind != failure.ProgramError || !strings.Contains(res.Failure.Message, "ZeroDivisionError") {
			t.Errorf("1 / 0 with its template stopped: %+v, want program_error (ZeroDivisionError), its tree not escaped", res.Failure)
		}
		res = reaperStopped(t, r, exit3, forked, true)
		wantForked(t, res)
		wantExit3(t, res)
	})
	t.Run("exec'd", func(t *testing.T) {
		r := newRunner(t, engine.DefaultLimits, namespaces.Options{}, engine.RunnerOptions{})
		wantExit3(t, reaperStopped(t, r, exit3, func(cmdline, _ []byte) bool {
			return bytes.Contains(cmdline, []byte(bootstrapLine))
		}, true))
	})
}

// reaperStopped runs program once it has called the tools ready and wait, and while it waits
// stops the parent of its interpreter (which match finds among this test's processes): with
// late, the parent is resumed 4 channel graces after the program goes on, else once the
// outcome came (bounded).
func reaperStopped(t *testing.T, r *engine.Runner, program string, match func(cmdline, parent []byte) bool, late bool) *engine.Outcome {
	t.Helper()
	tools := &gateTools{ready: make(chan struct{}), release: make(chan struct{})}
	done := make(chan *engine.Outcome, 1)
	go func() {
		done <- r.Run(context.Background(), engine.Execution{Program: "await call_tool(\"ready\")\nawait call_tool(\"wait\")\n" + program,
			Tools: tools, ToolNames: []string{"ready", "wait"}, Terms: engine.Terms{Network: engine.NetworkNone}})
	}()
	select {
	case <-tools.ready:
	case res := <-done:
		t.Fatalf("the program ended before it was ready: %+v %s", res.Failure, res.Stderr)
	}
	interp := ourProcesses(match)
	if len(interp) != 1 {
		t.Fatalf("interpreters %v, want one", interp)
	}
	resume := stop(t, parentOf(t, interp[0]))
	close(tools.release)
	if late {
		time.Sleep(4 * channelGrace)
		resume()
	}
	select {
	case res := <-done:
		resume()
		return res
	case <-time.After(gate.Scaled(time.Minute)):
		t.Fatalf("no outcome %s after the program went on with its reaper stopped", gate.Scaled(time.Minute))
		return nil
	}
}

// channelGrace is the engine's grace for a child's exit to show after its channel ended.
const channelGrace = 500 * time.Millisecond

// The first lines of a template's and of the bootstrap's source, in their command lines.
const (
	templateLine  = "# mcp-sandbox template"
	bootstrapLine = "# mcp-sandbox bootstrap"
)

func wantExit3(t *testing.T, res *engine.Outcome) {
	t.Helper()
	if res.Failure == nil || res.Failure.Kind != failure.ProgramError || !strings.Contains(res.Failure.Message, "status 3") {
		t.Fatalf("os._exit(3) with its reaper stopped: %+v, want program_error (status 3)", res.Failure)
	}
}

// stop stops process pid (SIGSTOP) and returns what resumes it, which runs when t ends too.
func stop(t *testing.T, pid int) (resume func()) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("stopping %d: %v", pid, err)
	}
	resume = func() { _ = syscall.Kill(pid, syscall.SIGCONT) }
	t.Cleanup(resume)
	return resume
}

// ourProcesses lists this test's live processes whose command line, and their parent's,
// match.
func ourProcesses(match func(cmdline, parent []byte) bool) []int {
	ours := gate.Ours()
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !ours(pid) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue // gone, or a zombie
		}
		ppid, err := parentPID(pid)
		if err != nil {
			continue
		}
		parent, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(ppid), "cmdline"))
		if match(cmdline, parent) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func parentOf(t *testing.T, pid int) int {
	t.Helper()
	ppid, err := parentPID(pid)
	if err != nil {
		t.Fatal(err)
	}
	return ppid
}

// parentPID reads pid's parent from /proc/pid/stat (after comm's last ')').
func parentPID(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 2 {
		return 0, os.ErrInvalid
	}
	return strconv.Atoi(f[1])
}
