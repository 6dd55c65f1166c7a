package launch

// Command is the hidden subcommand that runs the init helper.
const Command = "__sandbox-init"

// SpecEnv carries the JSON Spec to the helper.
const SpecEnv = "MCP_SANDBOX_INIT_SPEC"

// ExitSetupFailed is the helper's exit status when a setup step fails.
const ExitSetupFailed = 125

// Spec is everything the helper applies before it execs the interpreter.
type Spec struct {
	// Python is the interpreter's absolute path; Argv its argv (Argv[0] included).
	Python string   `json:"python"`
	Argv   []string `json:"argv"`
	Env    []string `json:"env"`
	// ArgvFromEnv, when not 0, is the index of the element of Argv that travels in ArgEnv,
	// not in the JSON (Environ, ReadSpec).
	ArgvFromEnv int `json:"argv_from_env,omitempty"`
	// Dir is the working directory (the workspace), entered after the identity drop.
	Dir string `json:"dir"`

	Rlimits Rlimits `json:"rlimits"`

	// Drop the identity to UID/GID (supplementary groups cleared) when set.
	Drop bool `json:"drop"`
	UID  int  `json:"uid,omitempty"`
	GID  int  `json:"gid,omitempty"`
	// ParentPID is the host's pid: if the helper's parent is already another process, the
	// host is gone and the helper exits rather than run an orphan.
	ParentPID int `json:"parent_pid"`

	// CgroupProcs are the cgroup.procs files of the execution's group, one a hierarchy, which
	// the program's first process is started inside (CgroupClone, v2) or joins as it starts
	// (CgroupTasksFDs, v1). Set, the group's pids limit bounds the tree, not RLIMIT_NPROC.
	CgroupProcs []string `json:"cgroup_procs,omitempty"`
	// CgroupTasksFDs (cgroup v1) are descriptors of the group's tasks files, one a hierarchy,
	// opened by the host. Whoever starts the program's first process joins the thread that
	// starts it, by writing 0 to each, so the process it forks (a Reaper's) or becomes (the
	// helper's exec) is born inside; a Reaper that forks a helper again does so from a thread
	// of its own that ends after the fork, and so stays outside itself. A thread moving only
	// itself skips the kernel's global lock a migration by pid takes for writing, whose first
	// taking after a pause waits out an RCU grace period (milliseconds; docs/design.md
	// §19.13). The descriptors are closed once written; the kernel checks the opener's
	// credentials, not the writer's.
	CgroupTasksFDs []int `json:"cgroup_tasks_fds,omitempty"`
	// CgroupClone: CgroupProcs is one cgroup v2 group, and whoever starts the program's
	// first process starts it inside (clone3 with CLONE_INTO_CGROUP: SysProcAttr.UseCgroupFD):
	// the host for a helper that is that process, a Reaper for its pid 2. Nobody writes to
	// cgroup.procs then, and nobody waits for a join.
	CgroupClone bool `json:"cgroup_clone,omitempty"`

	// Landlock, when set, confines the filesystem; a kernel without Landlock is tolerated
	// only when LandlockBestEffort is true.
	Landlock           *Landlock `json:"landlock,omitempty"`
	LandlockBestEffort bool      `json:"landlock_best_effort,omitempty"`

	// Seccomp installs the policy (internal/launch/seccomp): no new user namespaces, no mounts,
	// no kernel objects an execution could share with another or leave behind (SysV IPC, POSIX
	// message queues, keyrings, ptrace), no io_uring, BPF, userfaultfd or perf events, no
	// netlink but NETLINK_ROUTE, and no call through a foreign ABI.
	Seccomp bool `json:"seccomp,omitempty"`
	// DenyInet adds the refusal of every socket family but AF_UNIX (network none).
	DenyInet bool `json:"deny_inet,omitempty"`
	// Filter is that policy compiled, as the kernel reads a sock_filter array: the host
	// assembles it (seccomp.Filter(DenyInet, Template); internal/spawn fills it in for Seccomp
	// or DenyInet) and the helper only installs it, or hands it on. With Seccomp or DenyInet
	// and no Filter the helper fails rather than run a program unfiltered.
	Filter []byte `json:"filter,omitempty"`
	// SeccompHandOff, with Seccomp, has the helper hand the policy on to bwrap instead of
	// loading it: bwrap makes user and mount namespaces, which the policy refuses, and loads
	// it itself just before it execs the program. The helper writes Filter to a pipe left open
	// across exec, and puts "--seccomp FD" after Argv[0] (bwrap's options may come in any
	// order before its "--").
	SeccompHandOff bool `json:"seccomp_hand_off,omitempty"`
	// keepFD is the descriptor the helper leaves open across exec for SeccompHandOff.
	keepFD int

	// Mounts, when set, builds a private root before the identity drop; the helper must then
	// run in its own mount namespace (and, for Proc, its own pid namespace).
	Mounts *Mounts `json:"mounts,omitempty"`
	// ChannelParent: the host is the peer of fd 3. Inside a pid namespace getppid is 0, so
	// the helper checks that the channel has not hung up instead of checking ParentPID.
	ChannelParent bool `json:"channel_parent,omitempty"`

	// Reaper makes the helper a pid namespace's init: it starts itself again as pid 2 (with
	// Reaper cleared) to do everything else, reaps every process of the namespace, and when
	// pid 2 ends reports its wait status on StatusFD and exits, which ends the namespace.
	Reaper bool `json:"reaper,omitempty"`
	// ExecsProgram, with Reaper, on a host where the helper is root without a user namespace
	// of its own: the init confines itself as pid 2 would (the root built and pivoted into,
	// the bounding set emptied and its securebits locked, no_new_privs, Landlock, seccomp),
	// all of which its only child inherits, and starts the interpreter itself, dropped to
	// UID and GID (Go's fork and exec: setgroups, setgid, setuid; the exec leaves it no
	// capability), whose source after -c sets the rlimits as its first statements; it is not
	// started again as pid 2. One helper start fewer before the program (docs/design.md
	// §19.2). The host starts it inside the execution's cgroup (or joins it there while its
	// runtime starts), so its child is born there; it counts against the group's pids and
	// memory.
	ExecsProgram bool `json:"execs_program,omitempty"`
	// Subreaper, with Reaper, is the same init without a pid namespace (the process backend
	// on a host without a cgroup): it is the child subreaper of the program's tree, so every
	// orphan (setsid and double fork included) becomes its child; when the program's first
	// process ends, or the host sends SIGTERM (its Kill, or its death), it kills every
	// process of the tree until none is left and reports the status with Emptied set. The
	// first process starts a session of its own, so no signal to the program's process
	// group reaches this init.
	Subreaper bool `json:"subreaper,omitempty"`

	// IDMapFD, when positive, is a descriptor the helper reads one byte from before anything
	// else: the host writes it once it has written the uid and gid maps of the user namespace
	// the helper was started in (through newuidmap and newgidmap, for subordinate ids). End
	// of file instead means the host could not map them, and the helper exits.
	IDMapFD int `json:"idmap_fd,omitempty"`
	// UserNamespace: the helper runs in a user namespace of its own, where the kernel counts
	// RLIMIT_NPROC per (namespace, uid), so the limit needs nothing added for processes the
	// uid already runs elsewhere.
	UserNamespace bool `json:"userns,omitempty"`
	// Template: the helper execs a template (engine/backend/namespaces) rather than a program:
	// it builds the root as for a child but keeps, as root of its own user namespace, the
	// capabilities the template needs to make each child's namespaces and mounts and to drop
	// each child to its identity (TemplateCaps; everything else leaves the bounding set), and its
	// Filter is the template's policy (seccomp.TemplatePolicy). Drop must be false. The helper
	// never runs a program in this mode: each forked child installs the rest of the policy
	// (seccomp.TemplateChildBytes, stacked on the template's filter) and drops itself.
	Template bool `json:"template,omitempty"`
	// Trial: the helper exits 0 once it is up (and its ids are mapped): the host checks
	// that it can start one where it means to, in a user namespace say.
	Trial bool `json:"trial,omitempty"`

	// EgressFD is a Unix socket (a Reaper's, or a helper's that execs a wrapper in a network
	// namespace of its own) the init sends one descriptor on (SCM_RIGHTS)
	// before it starts the program: a TCP socket listening on 127.0.0.1:EgressPort of the
	// sandbox's own network namespace (lo brought up first). The host accepts on it and
	// proxies; the program, which cannot bind that port any more, has no other route out.
	EgressFD   int `json:"egress_fd,omitempty"`
	EgressPort int `json:"egress_port,omitempty"`

	// StdioChannel makes the channel (fd 3) the exec'd program's stdin and stdout, and closes
	// fd 3: an upstream stdio server run contained speaks MCP on it.
	StdioChannel bool `json:"stdio_channel,omitempty"`

	// KillUID, when set, turns the helper into a killer: it becomes that uid and kills every
	// process the uid owns, then exits. Used only for an exclusive sandbox uid.
	KillUID int `json:"kill_uid,omitempty"`
}

// Rlimits are set soft = hard, so a program cannot raise one back or ignore its signal into
// more time; the one exception is CPUHard. Zero leaves a limit as inherited.
type Rlimits struct {
	CPUSeconds uint64 `json:"cpu,omitempty"`
	// CPUHard, when above CPUSeconds, is RLIMIT_CPU's hard limit: the kernel sends SIGXCPU at
	// CPUSeconds (the bootstrap flushes the program's output and ends it) and SIGKILL at
	// CPUHard, for a program that ignores SIGXCPU.
	CPUHard uint64 `json:"cpu_hard,omitempty"`
	AS      uint64 `json:"as,omitempty"`
	FSize   uint64 `json:"fsize,omitempty"`
	// NProc is the number of new processes; the helper adds what the uid already runs,
	// because the kernel's limit is an absolute per-user count.
	NProc  uint64 `json:"nproc,omitempty"`
	NoFile uint64 `json:"nofile,omitempty"`
}

// Landlock lists the paths the child may read (and execute) and those it may also write.
type Landlock struct {
	ReadOnly  []string `json:"ro"`
	ReadWrite []string `json:"rw"`
}

// Mounts is the private root the helper builds and pivots into. Every path is the same
// inside as on the host.
type Mounts struct {
	// Root is an empty host directory; a small tmpfs mounted on it becomes the new root.
	Root string `json:"root"`
	// ReadOnly are host paths bound read-only (nosuid) at the same place; a path below one
	// already listed is skipped, a symbolic link is recreated rather than followed.
	ReadOnly []string `json:"ro"`
	// Binds are host paths bound at the same place after ReadOnly (nosuid, nodev; read-only
	// unless Writable): a contained server's declared paths. Unlike ReadOnly, a missing one
	// fails the start.
	Binds []Bind `json:"binds,omitempty"`
	// Devices are host device nodes bound into a fresh /dev (null, zero, random, urandom).
	Devices []string `json:"devices"`
	// Files are small files written into the root (a minimal /etc/passwd, /etc/hosts).
	Files map[string]string `json:"files,omitempty"`
	// Workspace is the working directory: a tmpfs of WorkspaceBytes owned by UID/GID.
	Workspace      string `json:"workspace"`
	WorkspaceBytes int64  `json:"workspace_bytes"`
	// TmpBytes sizes the tmpfs on /tmp (mode 1777).
	TmpBytes int64 `json:"tmp_bytes"`
	// Proc mounts a fresh /proc (needs a pid namespace to show only the sandbox's processes).
	Proc bool `json:"proc"`
	// Loopback brings lo up (in a fresh network namespace it is the only interface).
	Loopback bool `json:"loopback"`
	// Hostname is set in the UTS namespace when not empty.
	Hostname string `json:"hostname,omitempty"`
}

// Bind is one of Mounts.Binds.
type Bind struct {
	Path     string `json:"path"`
	Writable bool   `json:"rw,omitempty"`
}

// StatusFD is the descriptor a Reaper writes the Status of pid 2 to.
const StatusFD = 4

// Status is how the interpreter (pid 2) ended, as its reaper saw it: CPUSeconds from its
// rusage, RlimitCPU from the clock RLIMIT_CPU is checked against (RlimitCPUSeconds).
type Status struct {
	Code       int     `json:"code"`
	Signal     int     `json:"signal,omitempty"`
	CPUSeconds float64 `json:"cpu"`
	RlimitCPU  float64 `json:"rlimit_cpu,omitempty"`
	// Emptied: a Subreaper saw its tree empty (every process it killed reaped) before it
	// reported. Without it the host cannot tell that nothing outlived the execution.
	Emptied bool `json:"emptied,omitempty"`
}
