//go:build !unix

package upstream

import "os/exec"

func setProcessGroup(*exec.Cmd) {}

func killTree(cmd *exec.Cmd, _ string, _ bool) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
