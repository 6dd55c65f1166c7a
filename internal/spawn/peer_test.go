//go:build linux

package spawn

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestExiting: a running process is not exiting, a stopped one neither (it closed nothing and
// may run on); once SIGKILL is sent it is, while the kernel takes it down and as a zombie no
// one has reaped, as is a pid that names nothing. A Peer of it says the same, and AwaitKilled
// returns once it is gone, however long after its grace.
func TestExiting(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	pid := cmd.Process.Pid
	var p Peer
	p.Set(pid)
	defer p.Close()
	if Exiting(pid) || p.Exiting() {
		t.Fatal("a running process reads as exiting")
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if Exiting(pid) || p.Exiting() {
		t.Fatal("a stopped process reads as exiting")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if !Exiting(pid) || !p.Exiting() {
		t.Fatal("a process sent SIGKILL does not read as exiting")
	}
	ended := make(chan struct{})
	go func() {
		time.Sleep(100 * time.Millisecond) // a zombie, unreaped past the grace
		if !Exiting(pid) {
			t.Error("an unreaped zombie does not read as exiting")
		}
		_ = cmd.Wait()
		close(ended)
	}()
	if !AwaitKilled(ended, pid, 10*time.Millisecond) {
		t.Fatal("AwaitKilled gave up on a process the kernel was taking down")
	}
	if !p.Exiting() { // its pidfd: the pid itself may name another process by now
		t.Error("a reaped process does not read as exiting")
	}
}
