//go:build linux

package launch

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The seccomp policy is assembled in the host (internal/launch/seccomp, on go-seccomp-bpf,
// whose tables would be the largest initialiser of the helper's start) and arrives here
// compiled, as Spec.Filter: the helper installs those bytes or hands them on, and writes no
// policy of its own.

// installFilter installs filter on every thread of this process (TSYNC); no_new_privs must
// be set already.
func installFilter(filter []byte) error {
	prog, err := sockFilters(filter)
	if err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC,
		uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		return fmt.Errorf("seccomp: %v", errno)
	}
	return nil
}

// sockFilters is filter (a sock_filter array as the kernel reads it) as instructions, or an
// error when it cannot be one: the helper fails closed rather than run a program unfiltered.
func sockFilters(filter []byte) ([]unix.SockFilter, error) {
	const size = int(unsafe.Sizeof(unix.SockFilter{}))
	n := len(filter) / size
	if n == 0 || len(filter)%size != 0 || n > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp: the host sent no filter (%d bytes, not 1 to %d instructions)", len(filter), unix.BPF_MAXINSNS)
	}
	prog := make([]unix.SockFilter, n)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&prog[0])), len(filter)), filter)
	return prog, nil
}

// handFilterOn writes filter to a pipe and returns its read end, left open across exec for
// bwrap's --seccomp. The program is a few kilobytes at most, well within a pipe's buffer, so
// the write does not wait for the reader.
func handFilterOn(filter []byte) (int, error) {
	if _, err := sockFilters(filter); err != nil {
		return 0, err
	}
	var p [2]int
	if err := unix.Pipe2(p[:], 0); err != nil {
		return 0, fmt.Errorf("seccomp: %v", err)
	}
	unix.CloseOnExec(p[1])
	n, err := unix.Write(p[1], filter)
	unix.Close(p[1])
	if err != nil || n != len(filter) {
		unix.Close(p[0])
		return 0, fmt.Errorf("seccomp: handing the policy on: wrote %d of %d bytes (%v)", n, len(filter), err)
	}
	return p[0], nil
}
