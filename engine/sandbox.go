package engine

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"

	"github.com/mcp-sandbox/mcp-sandbox/engine/bootstrap"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
)

// Sandbox runs one program per execution. Run never returns an error: every failure, refusals
// included, is data in the Outcome. Describe never runs model-written code.
type Sandbox interface {
	Run(ctx context.Context, ex Execution) *Outcome
	Describe(ctx context.Context) *Description
}

// Execution is one program and everything it runs under.
type Execution struct {
	Program string
	// Terms are the narrowed terms; Runner narrows them once more against its own ceiling.
	Terms Terms
	// Tools is how the program's calls reach the host; nil means no tool is offered.
	Tools ToolCaller
	// ToolNames are the names the program may call (its TOOLS).
	ToolNames []string
	// Aliases are the names of ToolNames bound as Python names too. The host computes them
	// once, by its one rule (toolshape.Aliasable); the engine passes them on as they are.
	Aliases []string
	// Signatures maps each of ToolNames to the keywords its binding takes (toolshape.Signature:
	// {params, required, open}), JSON the host computes; the engine passes it on as it is, and
	// the program's binding refuses other keywords before a call is sent. Nil: unchecked there.
	Signatures json.RawMessage
	// Owner is who the execution runs for (the tenant). Warm pools are kept per owner: a child
	// started ahead for one owner is never handed to another.
	Owner string
	// Progress, when set, is called about once a second while the program runs, with how long
	// it has run and its standard output so far (nil from a backend that delivers it only at
	// the end: remote). It is called on the execution's own loop: it must return at once, and
	// may read stdout (safe for concurrent use) later, from elsewhere, but never write it.
	Progress func(elapsedSeconds float64, stdout *outputs.Capture)
	// Logger, when set, is the execution's logger (its lines name the execution, tenant,
	// agent and Run): a backend that logs about one execution uses it.
	Logger *slog.Logger
}

// ToolCaller is the host's side of a binding call; package binding satisfies it without
// importing engine. Implementations must be safe for concurrent use: calls may overlap.
type ToolCaller interface {
	// CallTool calls name with args (a JSON object). An Answer with a Kind is a refusal or a
	// tool failure that the program sees as ToolError(kind).
	CallTool(ctx context.Context, name string, args json.RawMessage) toolcall.Answer
	// ReadHandle reads a window of a handle this execution's own calls produced.
	ReadHandle(ctx context.Context, handle string, offset, limit int, pattern string) toolcall.Answer
}

// Description is what a backend is and what it can prove, from a fixed probe.
type Description struct {
	Backend      string     `json:"backend"`
	Ready        bool       `json:"ready"`
	Isolation    Level      `json:"isolation"`
	Guarantees   Guarantees `json:"guarantees"`
	Mechanisms   []string   `json:"mechanisms"`
	Problems     []string   `json:"problems"`
	LimitCeiling Limits     `json:"limit_ceiling"`
	Python       string     `json:"python,omitempty"`
	// Fallback is RunnerOptions.Fallback: why the profile runs below the isolated level.
	Fallback string `json:"fallback,omitempty"`
}

// BootstrapSource is the text every child runs first (package bootstrap), for a backend that
// prepares it ahead: a local backend has its interpreter compile it once (internal/python).
var BootstrapSource = bootstrap.Source

// Backend starts sandbox children for a Runner. Each local isolation mechanism is one Backend.
// Implementations must be safe for concurrent use.
type Backend interface {
	// Name is the backend's config name: process, namespaces, bwrap, container.
	Name() string
	// Start launches `python -I -c <bootstrap> args...` contained as the backend can, with the
	// channel as fd 3. It returns once the child is running.
	Start(ctx context.Context, spec LaunchSpec) (Child, error)
	// Mechanisms lists what this backend applies on this host (for Describe and doctor).
	Mechanisms() []string
}

// LaunchSpec is what a Runner asks a Backend to start.
type LaunchSpec struct {
	Terms Terms
	// Argv is the interpreter's argv after the interpreter itself.
	Argv []string
	// Stdout and Stderr receive the child's streams; the backend copies into them until EOF
	// or Child.Close.
	Stdout, Stderr io.Writer
	// Command, when set, is run instead of the interpreter (Argv is then unused): its first
	// element an absolute path the sandbox can execute, the channel its stdin and stdout, and
	// CommandEnv added to the environment built from nothing. An upstream stdio server runs so,
	// contained like a program (a backend implementing CommandBackend).
	Command    []string
	CommandEnv map[string]string
	// Paths are host paths bound into a Command's root at the same place, read-only or
	// read-write: what a contained upstream server was declared to need. A backend that
	// runs commands must honour them or fail the start; each must exist.
	Paths []Path
	// Egress is set under network rules: the backend gives the child a network namespace whose
	// one route out is a listener it hands back (EgressChild), and the environment and trust
	// store that lead there.
	Egress *EgressLaunch
	// Ahead marks a child started before its execution (a warm pool's): it must not wait for
	// a scarce resource (an identity of a run_as range), nor take so much of one that an
	// execution finding no child ready would wait for idle children.
	Ahead bool
	// Owner and Pooled: the child is for owner's warm pool of these terms (the Runner keeps
	// warm pools): a backend that forks children from a template kept per owner and terms
	// (namespaces, unless warm.start: exec) may fork this one. Without Pooled it execs.
	Owner  string
	Pooled bool
}

// Path is one host path given to a sandboxed command (LaunchSpec.Paths).
type Path struct {
	Path     string
	Writable bool
}

// Child is a started sandbox child.
type Child interface {
	// Channel is the host's end of the wire protocol. When it also has CloseWrite (a Unix
	// socket does), the Runner shuts down its write half to ask the child to flush its output
	// before a kill (FlushGrace); a channel without one gets no warning.
	Channel() io.ReadWriteCloser
	// Facts are what the backend knows from how it built the child's containment.
	Facts() Facts
	// Wait blocks until the child's main process has exited.
	Wait() Exit
	// Kill kills the whole tree of the execution. It is idempotent and safe to call
	// concurrently with Wait.
	Kill()
	// Workspace is a host path through which the workspace can be read while the program's
	// main process lives, or "" when the backend offers none (then a WorkspaceArchiver's
	// archive is read, where the child is one). The path may lead through the
	// sandbox's own root: open it only with os.Root, never following a symlink.
	Workspace() string
	// Close kills what is left, waits for the output copies (bounded), and removes the
	// workspace and any cgroup. It is idempotent.
	Close() TreeUsage
}

// WorkspaceArchiver is a Child whose workspace no host path reaches (a container in an
// engine's VM) but which can hand it over while the program's main process lives: a tar
// stream of the workspace, its entries relative to it, links and special files as headers
// without content. The engine reads it within the artifact policy's bounds (a hostile
// program may have written the archive's entries' content, never their bounds) and closes it.
type WorkspaceArchiver interface {
	WorkspaceArchive(ctx context.Context) (io.ReadCloser, error)
}

// Facts are the containment a backend built, independent of what the child observed.
type Facts struct {
	MountBoundary bool // the child has its own mount namespace without the host's files
	PIDNamespace  bool
	NetNamespace  bool
	// UserNamespace: the child runs in a user namespace of its own, where RLIMIT_NPROC binds
	// even its uid 0.
	UserNamespace bool
	Cgroup        bool // memory and pids limits and a tree kill through a cgroup
	// EngineCgroup: a container engine elsewhere (a VM's, another machine's) holds the
	// memory and pids limits in a cgroup of its own, which this host cannot read: they are
	// graded from what the child's probe saw of its cgroup (wire.Probe.CgroupMemory,
	// CgroupPIDs), never assumed.
	EngineCgroup bool
	// Subreaper: an init of the backend's own is the child subreaper of the program's tree
	// and kills it to the last process (no cgroup or pid namespace needed); it can do so
	// only while the program cannot kill it, which SignalScoped or another uid ensures.
	Subreaper bool
	// SignalScoped: Landlock keeps the program's signals inside its own sandbox.
	SignalScoped bool
	// Unkillable: nothing the backend has can kill the program's processes. The host is
	// root without CAP_KILL (a narrowed bounding set), the program runs as another uid, and
	// the tree's kill comes down to kill(2) from the host or a root init of its own (a v1
	// cgroup, a subreaper, bwrap's namespace): every SIGKILL is refused. A program that does
	// not end on its own outlives its wall clock, and its tree the execution.
	Unkillable bool
	Seccomp    bool
	Landlock   bool
	// HostUID is the host's uid; RunAsUID the uid the child was meant to run as.
	HostUID, RunAsUID int
	// Exclusive identity: no other execution shares RunAsUID, so a kill by uid is exact.
	ExclusiveUID bool
	// InterpreterIsInit: the interpreter is pid 1 of its own pid namespace, where the kernel
	// drops every signal sent from inside the namespace that it has no handler for, SIGKILL
	// included. A SIGKILL it died of came from the kernel or from outside the sandbox.
	InterpreterIsInit bool
	// NoMemoryCap: the platform has no memory limit a child can be held to (macOS: no
	// address-space rlimit CPython respects, no cgroup). memory is graded unavailable and,
	// as the specification has it, the process level runs without it; the isolated level
	// still requires it, so it is refused there.
	NoMemoryCap bool
	// Graded are grades the backend established itself, each by a hostile child it ran at its
	// start (a Job Object's limits: engine/backend/jobobject), in place of what the probe's
	// rlimits would say for those dimensions.
	Graded Guarantees
	// Lacking are dimensions this platform offers no mechanism for, or whose mechanism the
	// backend's own hostile child saw fail (Windows: identity and file size; under Wine also
	// memory). As with NoMemoryCap the process level runs without them, graded as they are;
	// the isolated level still requires them.
	Lacking []Dimension
	// Forked, when set, says the child was forked from a template rather than exec'd: the
	// result's start block (StartInfo). Nil for an exec'd child.
	Forked *StartInfo
}

// StartInfo is the result's start block: how the execution's child was made. Kind is
// StartExec or StartForked; a forked child says which template it came from, how old that
// template was and how many children it had forked, and what it shares with its siblings
// (the children of the same template: executions of the same tenant and terms).
type StartInfo struct {
	Kind               string   `json:"kind"`
	Template           string   `json:"template,omitempty"`
	TemplateAgeSeconds *float64 `json:"template_age_seconds,omitempty"`
	TemplateChildren   *int     `json:"template_children,omitempty"`
	SharedWithSiblings []string `json:"shared_with_siblings,omitempty"`
}

// Values of StartInfo.Kind.
const (
	StartExec   = "exec"   // the child's interpreter was exec'd for it
	StartForked = "forked" // the child was forked from a template (Facts.Forked)
)

// Exit is how the child's main process ended.
type Exit struct {
	Code       int // -1 when killed by a signal
	Signal     string
	CPUSeconds float64 // from rusage: the scheduler's precise CPU time
	// RlimitCPUSeconds is the interpreter's CPU time as RLIMIT_CPU counts it (utime+stime
	// as sampled at the scheduler's ticks), read from the exited interpreter before it was
	// reaped; 0 when the backend could not read it. Under load it runs well ahead of
	// CPUSeconds, and only it says whether a SIGKILL was the CPU limit's (cpuLimitKill).
	RlimitCPUSeconds float64
	Err              error // the backend could not wait
}

// TreeUsage is what a cgroup observed over the whole tree.
type TreeUsage struct {
	OOMKilled    bool // the memory limit killed a process of the tree
	PIDsLimitHit bool // a fork or thread creation was refused at the pids limit
	// Escaped: the mechanism that kills the tree did not report it dead (a subreaper the
	// program killed, a SIGKILL the kernel refused): processes of the execution may have
	// outlived it.
	Escaped bool
	// EscapedWhy says why, when the backend knows better than "the program killed or stopped
	// its init" (the result's failure carries it).
	EscapedWhy string
}
