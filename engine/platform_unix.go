//go:build unix

package engine

import "syscall"

// openArtifact are the flags an artifact is opened with: never through a final symlink, and
// never blocking on a fifo the program left.
const openArtifact = syscall.O_NOFOLLOW | syscall.O_NONBLOCK

// The signals that mean a limit, by their names as Exit.Signal carries them.
var (
	signalCPU      = syscall.SIGXCPU.String()
	signalFileSize = syscall.SIGXFSZ.String()
	signalKill     = syscall.SIGKILL.String()
)
