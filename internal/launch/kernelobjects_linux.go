//go:build linux

package launch

import (
	"fmt"

	"github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

// kernelObjectSyscalls reach kernel objects that outlive the process that made them, or that
// every process of a uid shares, so one execution could leave something for a later one
// (another tenant's) to read, or pin host memory after it ends:
//
//   - SysV IPC (shared memory, message queues, semaphores) lives in the IPC namespace, the
//     host's at the process level: a segment stays after its creator exits.
//   - POSIX message queues live in the IPC namespace's mqueue filesystem the same way.
//   - Keyrings: the user keyring of the sandbox uid is shared by every execution that runs
//     as that uid, across namespaces too when there is no user namespace.
//   - ptrace and process_vm_readv/writev reach another live execution of the same uid (its
//     memory, its channel) where nothing else stands between them (Landlock does, where the
//     kernel has it).
//
// The other ABI entry points (the ipc(2) multiplexer of i386, the 32-bit keyctl) are refused
// wholesale by denyForeignArch. POSIX shared memory and named semaphores are files in
// /dev/shm: the filesystem confinement keeps them (the workspace is the only writable
// directory at the process level under Landlock; the isolated backends have a private /dev).
// Abstract unix sockets are scoped by Landlock (ABI 6) at the process level and by the network
// namespace above it; timers and timerfds die with their process.
var kernelObjectSyscalls = []string{
	"shmget", "shmat", "shmdt", "shmctl",
	"msgget", "msgsnd", "msgrcv", "msgctl",
	"semget", "semop", "semtimedop", "semctl",
	"mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
	"add_key", "request_key", "keyctl",
	"ptrace", "process_vm_readv", "process_vm_writev",
}

// denyKernelObjects installs a seccomp filter refusing kernelObjectSyscalls with EPERM, and,
// unless foreign is false (another filter of this helper will), every system call made
// through another ABI than this build's.
func denyKernelObjects(foreign bool) error {
	policy := seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{Action: seccomp.ActionErrno | seccomp.Action(unix.EPERM), Names: kernelObjectSyscalls},
		},
	}
	filter := seccomp.Filter{NoNewPrivs: true, Flag: seccomp.FilterFlagTSync, Policy: policy}
	if err := seccomp.LoadFilter(filter); err != nil {
		return fmt.Errorf("seccomp: kernel objects: %v", err)
	}
	if !foreign {
		return nil
	}
	return denyForeignArch()
}
