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

	// CgroupProcs are cgroup.procs files the helper writes its pid to before anything else.
	CgroupProcs []string `json:"cgroup_procs,omitempty"`

	// Landlock, when set, confines the filesystem; a kernel without Landlock is tolerated
	// only when LandlockBestEffort is true.
	Landlock           *Landlock `json:"landlock,omitempty"`
	LandlockBestEffort bool      `json:"landlock_best_effort,omitempty"`

	// DenyInet installs the seccomp filter refusing every socket family but AF_UNIX (and
	// io_uring, which could create sockets past the filter).
	DenyInet bool `json:"deny_inet,omitempty"`

	// KillUID, when set, turns the helper into a killer: it becomes that uid and kills every
	// process the uid owns, then exits. Used only for an exclusive sandbox uid.
	KillUID int `json:"kill_uid,omitempty"`
}

// Rlimits are set soft = hard, so a program cannot raise one back or ignore its signal into
// more time. Zero leaves a limit as inherited.
type Rlimits struct {
	CPUSeconds uint64 `json:"cpu,omitempty"`
	AS         uint64 `json:"as,omitempty"`
	FSize      uint64 `json:"fsize,omitempty"`
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
