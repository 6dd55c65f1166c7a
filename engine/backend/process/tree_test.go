//go:build linux

package process_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/process"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/spawned"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// TestKilledSubreaperIsNeverACleanResult: without a cgroup, a program that can signal the
// helper keeping its tree (same uid, no Landlock signal scope) kills it after leaving a
// setsid grandchild behind. The grade said so beforehand (process_tree unverified), and the
// result is a failure with process_tree unavailable: never a survivor with a clean result.
func TestKilledSubreaperIsNeverACleanResult(t *testing.T) {
	gate.Hostile(t)
	const marker = "mcp-sandbox-reaper-test-survivor"
	b, err := process.New(context.Background(), &process.Options{Options: spawned.Options{Disable: []string{"cgroup", "identity", "landlock"}}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := engine.NewRunner(b, &engine.RunnerOptions{AllowSameUID: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	t.Cleanup(func() { killMarked(marker) })
	if d := r.Describe(context.Background()); d.Guarantees.Get(engine.DimProcessTree) != engine.Unverified {
		t.Errorf("a subreaper the program can kill: process_tree graded %s, want unverified", d.Guarantees.Get(engine.DimProcessTree))
	}
	// The grandchild keeps the program's output streams, or lets go of them so that the
	// output ends with the program's done (and the result could be had before the teardown).
	for name, redirect := range map[string]string{
		"grandchild keeps the output": "",
		"grandchild lets go of it": `
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)`,
	} {
		t.Run(name, func(t *testing.T) {
			res := r.Run(context.Background(), engine.Execution{Program: `import os, sys, time
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() == 0:` + redirect + `
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(60)", "` + marker + `"])
    os._exit(0)
os.waitpid(pid, 0)
os.kill(os.getppid(), 9)
time.sleep(0.5)
"escaped?"`})
			if res.Failure == nil || res.Failure.Kind != failure.ProtocolViolation || !res.Failure.Executed {
				t.Fatalf("want a protocol_violation of a program that ran, got %+v (value %s)", res.Failure, res.Value)
			}
			if g := res.Guarantees.Get(engine.DimProcessTree); g != engine.Unavailable {
				t.Errorf("process_tree graded %s after the tree's init was killed, want unavailable", g)
			}
			t.Logf("failure: %s", res.Failure.Message)
		})
	}
}

// killMarked kills the processes whose command line holds marker: what a test's program left.
func killMarked(marker string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && bytes.Contains(cmdline, []byte(marker)) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
