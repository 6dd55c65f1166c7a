//go:build linux

package launch

import (
	"os/exec"
	"syscall"
	"testing"
)

// TestExitedCPUReachesTheLimit: a child killed by RLIMIT_CPU = 1 s (soft = hard) has used at
// least 1 s by the clock RLIMIT_CPU is checked against, read from the zombie, whatever its
// rusage says (on a loaded machine, well under 1 s).
func TestExitedCPUReachesTheLimit(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "ulimit -t 1; while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cpu, ok := ExitedCPU(cmd.Process.Pid)
	err := cmd.Wait()
	if !ok {
		t.Fatalf("the exited child's CPU clock could not be read (wait: %v)", err)
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the child ended with %v, want SIGKILL from RLIMIT_CPU", cmd.ProcessState)
	}
	rusage := (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	if cpu < 1 || cpu > 1.5 {
		t.Fatalf("RLIMIT_CPU's clock read %.3fs at the kill, want within [1, 1.5) (rusage %.3fs)", cpu, rusage)
	}
	t.Logf("killed at %.3fs by RLIMIT_CPU's clock, %.3fs by rusage", cpu, rusage)
	if _, ok := RlimitCPUSeconds(cmd.Process.Pid); ok {
		t.Errorf("a reaped child's CPU clock was still readable")
	}
}

// TestWaitAnyNamesTheChild: waitAny reports the pid of the child that exited, and leaves it
// to be reaped.
func TestWaitAnyNamesTheChild(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "exit 3")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	got, err := waitAny()
	if err != nil {
		t.Fatal(err)
	}
	if got != cmd.Process.Pid {
		t.Fatalf("waitAny named pid %d, the child is %d", got, cmd.Process.Pid)
	}
	if err := cmd.Wait(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 3 {
		t.Fatalf("the child was not left to reap: %v", err)
	}
}
