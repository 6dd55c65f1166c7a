package seccomp

// kernelObjectSyscalls reach kernel objects that outlive the process that made them, or that
// every process of a uid shares, so one execution could leave something for a later one
// (another tenant's) to read, or pin host memory after it ends:
//
//   - SysV IPC (shared memory, message queues, semaphores) lives in the IPC namespace, the
//     host's at the process level: a segment stays after its creator exits.
//   - POSIX message queues live in the IPC namespace's mqueue filesystem the same way.
//   - Keyrings: the user keyring of the sandbox uid is shared by every execution that runs
//     as that uid, across namespaces too when there is no user namespace.
//   - ptrace, process_vm_readv/writev and pidfd_getfd reach another live execution of the same
//     uid (its memory, its descriptors, its channel) where nothing else stands between them
//     (Landlock does, where the kernel has it).
//
// The other ABI entry points (the ipc(2) multiplexer of i386, the 32-bit keyctl) are refused
// wholesale by the policy's foreign-ABI guard (Program). POSIX shared memory and named semaphores are files in
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
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
}
