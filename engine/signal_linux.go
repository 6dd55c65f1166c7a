package engine

import "syscall"

// LinuxSignal names signal n of a Linux kernel (a container's, whatever system runs the
// host) as Exit.Signal carries it on this build: here, the kernel's own names.
func LinuxSignal(n int) string { return syscall.Signal(n).String() }
