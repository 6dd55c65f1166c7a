//go:build unix

package upstream

import (
	"os/exec"
	"syscall"
)

// setProcessGroup puts the server in its own process group so that Close can end the helpers
// it starts (npx starts node, for one) along with it.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killTree ends the server and every process it started: on Linux the tree is first stopped
// (stopTree: descendants by parent, process group, or the inherited marker) so that nothing
// forks or loses its parent while it is collected, then the group and each member get
// SIGKILL. Elsewhere the process group is what is killed. alive is false once the server
// itself was reaped: its pid may be another process's by then, so only its group (which
// keeps the id while a member lives) and its marked processes are signalled.
func killTree(cmd *exec.Cmd, marker string, alive bool) {
	if cmd.Process == nil {
		return
	}
	pid := cmd.Process.Pid
	members := stopTree(pid, marker, alive)
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	if alive {
		_ = cmd.Process.Kill()
	}
	for _, m := range members {
		_ = syscall.Kill(m, syscall.SIGKILL)
	}
}
