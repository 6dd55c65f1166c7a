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

func killProcessGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Process.Kill()
	}
}
