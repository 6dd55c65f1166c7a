//go:build linux

package launch

import (
	"fmt"
	"runtime"
	"unsafe"

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

// denyForeignArch installs a seccomp filter refusing (EPERM) every system call made through
// another ABI than this build's: the 32-bit entry points (int 0x80 on x86-64, AArch32 on
// arm64) and x32. A filter written for native syscall numbers — the inet socket filter —
// does not see those at all, so without this a program could reach them by a few bytes of
// machine code and make an inet socket anyway.
func denyForeignArch() error {
	arch, ok := nativeArch()
	if !ok {
		return fmt.Errorf("seccomp: no foreign-ABI filter for %s", runtime.GOARCH)
	}
	const (
		ldAbsW = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeqK   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jgeK   = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		retK   = unix.BPF_RET | unix.BPF_K
	)
	deny := uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)&unix.SECCOMP_RET_DATA)
	prog := []unix.SockFilter{
		{Code: ldAbsW, K: 4},                         // seccomp_data.arch
		{Code: jeqK, Jt: 0, Jf: 3, K: arch},          // foreign arch → deny
		{Code: ldAbsW, K: 0},                         // seccomp_data.nr
		{Code: jgeK, Jt: 1, Jf: 0, K: x32SyscallBit}, // x32 → deny
		{Code: retK, K: unix.SECCOMP_RET_ALLOW},
		{Code: retK, K: deny},
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC,
		uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		return fmt.Errorf("seccomp: foreign-ABI filter: %v", errno)
	}
	return nil
}
