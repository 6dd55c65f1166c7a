//go:build !linux

package engine

import "strconv"

// LinuxSignal names signal n of a Linux kernel (a container's in an engine's VM) as
// Exit.Signal carries it on this build: the limits' signals by the names this build gives
// them (their numbers are the same here), any other by its number, which this system's
// names would mistake.
func LinuxSignal(n int) string {
	switch n {
	case 9:
		return signalKill
	case 24:
		return signalCPU
	case 25:
		return signalFileSize
	}
	return "signal " + strconv.Itoa(n)
}
