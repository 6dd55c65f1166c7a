// Package process is the process-level backend: a separate process per execution, contained
// by what an unprivileged child can be held to without a kernel boundary around its view of
// the system.
//
// Each child is the re-executed init helper (internal/launch), which sets rlimits (soft =
// hard), joins a fresh cgroup where one is writable (memory and pids over the whole tree, and
// the kill), starts a new session, drops to the run_as identity when the host is root,
// re-arms the parent-death signal, sets no_new_privs, applies Landlock (read-only to the
// interpreter and system libraries, read-write to the workspace) and the seccomp policy
// (internal/launch: no user namespaces or mounts, none of the kernel objects an execution
// could share or leave behind, no io_uring, BPF or netlink to kernel subsystems, and no inet
// sockets with network none), and execs python3 -I with an environment built
// from nothing. The workspace is a fresh empty directory, removed afterwards; its name carries
// the server's owner tag (internal/owner), so New sweeps the workspaces a killed server left,
// and only those whose owner is provably dead.
//
// The tree dies with the execution: through the cgroup where there is one. Otherwise (no
// root, or no writable cgroup) the helper stays as the tree's child subreaper
// (launch.Spec.Subreaper): every orphan, setsid and double fork included, becomes its child,
// and it kills them to the last one when the program ends or the host asks, then reports the
// tree empty. The program must not be able to kill that init first: it runs as another uid
// (the identity drop) or under Landlock's signal scope (ABI 6), and process_tree is enforced;
// otherwise it is unverified, and an execution whose init did not report the tree empty ends
// with a failure (TreeUsage.Escaped), never a clean result. An exclusive uid (a range run_as)
// is also killed by uid. A root host without CAP_KILL can signal none of the identity's
// processes, so neither a v1 cgroup nor the subreaper can kill them (a v2 cgroup.kill still
// can): the backend marks its children Unkillable (process_tree unavailable), logs it once,
// and spawn's Close waits a bounded time for a main process its SIGKILL never reached.
//
// It imports engine, engine/backend/spawned, failure, internal/… and x/sys. A Backend is safe for concurrent use.
package process
