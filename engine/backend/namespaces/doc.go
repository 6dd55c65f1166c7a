// Package namespaces is the native isolated-level backend: a kernel boundary built from
// Linux namespaces by the re-executed init helper (internal/launch), with no external binary.
//
// The host starts the helper with CLONE_NEWNS|CLONE_NEWPID|CLONE_NEWNET|CLONE_NEWIPC|
// CLONE_NEWUTS (plus CLONE_NEWUSER, mapping the caller's uid and gid to 0 inside, when the
// host is not root; a network-granted execution keeps the host's network namespace and is
// graded as such). The helper is pid 1 of the new pid namespace. It joins the execution's
// cgroup (where one can be created), builds a root on a small tmpfs from read-only binds of
// the interpreter's directories and the system libraries (nothing of the host's home, data
// or temporary files), a minimal /etc written fresh, a /dev with null, zero, random and
// urandom only, a fresh /proc, a size-limited tmpfs workspace as the working directory and a
// small /tmp; it pivots into that root, detaches the host's tree, remounts the root
// read-only, brings up lo (the only interface), then applies the same identity drop,
// no_new_privs, seccomp and rlimits as the process level and execs Python.
//
// Decision: the helper stays pid 1 as a reaping init (launch.Spec.Reaper). Python as pid 1
// would ignore every signal it has no handler for, and os.getppid() would be 0, so the
// program's kill(getppid(), SIGKILL) would be a silent no-op instead of the PermissionError a
// process-level program gets. As root the init builds the root and confines itself, and
// starts Python as its child dropped to the identity, which sets its own rlimits first
// (launch.Spec.ExecsProgram; it runs inside the cgroup); without root it starts itself again
// as pid 2 to do that (its capabilities come from that exec). The init stays root of its
// namespaces, holds none of the program's descriptors, reaps orphans, and when pid 2 ends writes pid 2's
// wait status and CPU time to a status pipe (launch.StatusFD) and exits, which makes the
// kernel kill whatever is left in the namespace: the tree kill without a cgroup. The host
// still kills with SIGKILL from outside; a CPU-limit kill (RLIMIT_CPU soft = hard: SIGKILL at
// the limit) reaches the engine as SIGKILL with the program's CPU time as RLIMIT_CPU counts
// it, read by the init from the zombie before reaping it, i.e. cpu_seconds.
//
// Options.Template (the profile's warm.start: auto or template) forks a warm pool's children from a
// template kept per owner and terms instead (template_linux.go, template.py): the same helper
// and root in a user namespace of the pool's own (mapped by the host as root, by newuidmap
// onto the user's subordinate range without root), a Python template that loads the bootstrap
// once and forks each child into its own pid and mount namespaces, where the child (the
// program's interpreter, its namespace's pid 1, reaped by the template) drops to a uid of its
// own, sets its rlimits and installs the Landlock ruleset and the seccomp program Go built
// before the bootstrap's probe. docs/design.md §4.4 has the design, what it shares between siblings and
// what is not built yet. Where a prerequisite is missing (TemplateWhy) or a template failed to
// start within templateRetry, children are exec'd. Lock order: templates.mu, then a
// template's mu.
//
// The empty host directory the root is mounted on is named with the server's owner tag
// (internal/owner); New removes those a killed server left, only a provably dead owner's.
//
// It imports engine, engine/backend/spawned, failure, internal/… and x/sys. A Backend is safe for concurrent use.
package namespaces
