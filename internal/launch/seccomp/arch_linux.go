//go:build linux

package seccomp

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// nativeArch is the AUDIT_ARCH of the system calls this build makes.
func nativeArch() (uint32, bool) {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64, true
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64, true
	}
	return 0, false
}

// x32SyscallBit marks the x32 ABI's system calls, which arrive with the native x86-64 arch.
const x32SyscallBit = 0x40000000
