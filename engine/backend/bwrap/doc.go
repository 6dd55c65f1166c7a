// Package bwrap is the isolated-level backend through an installed bubblewrap (`bwrap`).
//
// The init helper (internal/launch) joins the execution's cgroup, drops to the run_as
// identity, sets no_new_privs and the rlimits, and execs bwrap, so bwrap runs as the sandbox
// identity and builds its namespaces unprivileged, through a user namespace (bwrap started
// as root with --uid would still be host root; this backend never does that). bwrap then
// makes a root of read-only binds (the interpreter's directories and system libraries), a
// fresh /proc and a minimal /dev, a size-limited tmpfs workspace as the working directory and
// a small /tmp; it unshares every namespace (only loopback inside), dies with its parent,
// and execs Python with the channel still on fd 3.
//
// bwrap reports a command killed by a signal as exit status 128+signal; Wait turns that back
// into the signal, so a CPU-limit kill still reads as cpu_seconds. A program that itself
// exits with such a status is reported as killed by that signal. bwrap, not the host, reaps
// the interpreter, so the host cannot read the clock RLIMIT_CPU is checked against from the
// dead interpreter as the other backends do; it need not: Python as its namespace's init
// cannot be sent SIGKILL by anything inside the sandbox, so a SIGKILL the host did not send
// and the cgroup's OOM killer did not explain is the CPU limit's (Facts.InterpreterIsInit).
//
// Under network rules (root only) the host starts the init helper in a network namespace of
// its own; the helper sends the host a listener on its loopback (the egress proxy's) before
// it execs bwrap, which then keeps that namespace instead of unsharing one (docs/design.md §18).
//
// Python runs as pid 1 of bwrap's pid namespace (--as-pid-1), so the outer bwrap waits for
// it directly and the CPU time in the host's wait status is the program's; --new-session
// keeps it off any terminal. Orphans stay zombies until the execution ends (the pids limit
// bounds them), and the namespace dies with Python.
//
// The seccomp policy (internal/launch: no nested user namespaces or mounts, no kernel objects
// such as keyrings, no io_uring, BPF or netlink to kernel subsystems, and with network none no
// inet sockets) cannot be loaded before bwrap, which makes a user namespace and mounts itself:
// the init helper hands it compiled to bwrap (--seccomp on a pipe), which loads it once the
// sandbox is built, just before it execs the interpreter. Not applied here: Landlock. Known gap against the contract: os.getppid() is
// 0 inside, and a pid namespace's init ignores signals from inside, so a program's
// os.kill(os.getppid(), 9) is a silent no-op rather than the PermissionError the contract
// expects (the "killing the parent" case fails here; the program reaches nothing outside).
//
// It imports engine, engine/backend/spawned, failure, internal/… and the standard library. A Backend is safe for
// concurrent use.
package bwrap
