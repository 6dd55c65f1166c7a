// Package container is the isolated-level backend through a container runtime's CLI: podman
// or docker, found on PATH (podman first, and a runtime counts only when it answers) or named.
// It never pulls or builds an image: a missing one is a refusal that names the command to get
// it (`make sandbox-image` builds localhost/mcp-sandbox-python from this host's Python).
//
// One execution is one `<runtime> run --rm -i --pull=never` of the image's interpreter as the
// container's only process (pid 1 of its pid namespace, so the namespace dies with it), under:
// the run_as identity (--user), --network=none unless the terms grant network, a read-only
// root with a size-limited tmpfs workspace at a fresh path and a small /tmp, no capabilities,
// no-new-privileges, the runtime's default seccomp profile, the terms' rlimits as --ulimit (cpu,
// data, fsize, and nofile and nproc explicitly: a runtime's defaults may exceed the host's hard
// limits, which podman 4.3 with runc refuses; data stands in for as, which neither runtime
// knows, so that a large allocation is a MemoryError), --pids-limit, and the environment built from
// nothing (--unsetenv-all on podman; the bootstrap drops whatever else the runtime or the image
// adds, HOSTNAME for one, before it probes).
//
// The channel is a Unix socket in a per-execution directory, bind-mounted read-only at
// /run/mcp-sandbox; its parent directory is the owner's, mode 0700, so no other local account
// reaches the socket through the host's file system. The host mints a token per execution and
// writes it to the container's stdin (never argv or the environment, which other accounts can
// read); the bootstrap presents it as the first line on the socket, then speaks the wire
// protocol exactly as on fd 3. A connection without the token is dropped, and once the token
// has arrived the listener is closed and its socket removed, so a second connection is refused.
// A process running as the container's own uid on the host can still reach the socket through
// /proc/PID/root (and ptrace the container's process): give container profiles a run_as no
// other backend shares.
//
// As root, each execution also gets a cgroup of its own that the runtime nests the container
// under (--cgroup-parent, cgroupfs). It carries the memory limit; its CPU usage, which keeps
// what removed subgroups used, less the runtime monitor's (conmon), is the execution's CPU
// time; and it is the tree kill that does not wait for the runtime's CLI. An OOM kill is
// counted where the victim was (on cgroup v1 only there), in the container's (or monitor's)
// cgroup, which the runtime removes with the container: the count is noted when the channel
// ends, when the interpreter exits (a pidfd) and before any kill, and once one is counted the
// exit is known (killed at the memory limit) without waiting for the runtime. The interpreter is pid 1 of its pid namespace, which nothing
// inside can SIGKILL, so a SIGKILL the host did not send and no OOM kill explains is the
// kernel's RLIMIT_CPU (reported with at least the limit as its CPU time: the kernel counts that
// limit in ticks, ahead of the cgroup's precise figure on a busy host). Without the cgroup the
// limits are the runtime's flags (--memory) and a SIGKILL reads as a signal, not as a limit.
//
// The runtime reports a container's end a moment after it dies (its monitor, then `run --rm`'s
// removal: about 0.3 s, more on a busy host). When the channel ends because the interpreter
// exited or is exiting (it has released its memory, or its pidfd is readable), the end is
// reported to the Runner only once the exit is known, so a kill at a limit never reads as a
// child that closed its channel and kept running. The execution is over then: the container's
// processes are killed and its memory limit lifted, because files the program left in its
// tmpfs mounts still fill the memory cgroup, only the container's end frees them, and an
// exiting process can wait on that memory indefinitely.
//
// The cancel, the wall clock and the tree kill reach the container: Kill closes the channel,
// kills every process in the container's cgroup, and runs the runtime's kill when the container
// has not ended within a moment; Close removes the container when `run --rm` could not, the
// socket directory and the cgroup. Nothing else is created (no volume: the tmpfs mounts are not
// volumes). A server killed outright leaves its containers behind: each Backend's owner id is
// an internal/owner name (it carries the process's owner tag, backed by its owner lock) that
// names its directory, its containers (and labels them io.mcp-sandbox.owner) and their
// cgroups; New sweeps every labelled container, cgroup and directory whose owner id
// internal/owner proves dead, finding containers by label, so those of a server whose
// directory is gone (a restarted service's private /tmp) are swept too. Nothing another live
// process owns is touched, nothing without the label, and no id without a tag (an older
// version's). Without root, the pause process podman starts at a user's first command is
// ended when Detect returns and at Close, if New or Detect started it (PauseWatch).
//
// On a hybrid cgroup layout (v1 controllers plus a cgroup2 mount holding controllers) crun
// refuses to run containers; with podman and no OCI runtime named, the backend passes
// --runtime runc when runc is installed and says so in Mechanisms, and otherwise refuses with
// what to install. An OCI runtime may be named (runsc for gVisor, which must allow host Unix
// sockets: --host-uds=open); it is reported in Mechanisms.
//
// Where the processes live: podman's monitor and the container's pid namespace descend from
// the process that ran `podman run`, so under the tests' pid-namespace gate (internal/gate)
// the container's processes are inside the tests' namespace, visible in its /proc (the
// contract suite's survivor scan sees them) and killed with it (a test binary killed outright
// leaves podman records of containers that died with it; the next sweep removes them). Docker's
// daemon starts containers outside the caller's namespaces: a caller in a pid namespace of its
// own (the tests') cannot see them, so there the survivor scan proves nothing, the interpreter's
// exit is not seen before the runtime reports it, and artifacts are not collected (the
// workspace is read through /proc/PID/root).
//
// As with bwrap, a status of 128+N is read as "killed by signal N": a program that exits with
// such a status itself is reported as killed by that signal, and 137 as its CPU limit.
//
// It imports engine, failure, internal/identity, internal/spawn (the child's environment),
// internal/cgroup (its kill loop and readers), internal/owner (its owner id and sweep),
// x/sys and the standard library. A Backend and its children are safe for concurrent use.
package container
