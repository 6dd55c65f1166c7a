//go:build !unix

package engine

import "os"

// No local backend runs here (doctor says so); these keep the engine building for a remote
// backend. os.Root still refuses a path that leaves the workspace.
const openArtifact = os.O_RDONLY

// Signals that no process here can report.
var (
	signalCPU      = "SIGXCPU"
	signalFileSize = "SIGXFSZ"
	signalKill     = "SIGKILL"
)
