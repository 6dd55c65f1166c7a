package wire

import (
	"encoding/json"

	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
)

// Version is the protocol version the child announces in hello. A mismatch is a violation.
const Version = 1

// Frame type names.
const (
	TypeHello  = "hello"
	TypeCall   = "call"
	TypeRead   = "read"
	TypeDone   = "done"
	TypeRun    = "run"
	TypeAbort  = "abort"
	TypeResult = "result"
)

// Frame is any frame of either direction.
type Frame interface{ frameType() string }

// Hello is the child's first frame: who it is and what containment it observed, before any
// program byte arrives.
type Hello struct {
	Type    string `json:"type"`
	Version int    `json:"version"`
	Probe   Probe  `json:"probe"`
}

// Probe is what the child observed about its own containment.
type Probe struct {
	PID    int   `json:"pid"`
	UID    int   `json:"uid"`
	GID    int   `json:"gid"`
	Groups []int `json:"groups"`
	// Canary is "readable", "unreadable" or "absent" (the path did not resolve), for the file
	// the host wrote outside the workspace.
	Canary string `json:"canary"`
	// InetSocket and Inet6Socket: whether socket(AF_INET[6]) succeeded.
	InetSocket  bool `json:"inet_socket"`
	Inet6Socket bool `json:"inet6_socket"`
	// ReachedV4 and ReachedV6: whether a connection to the host's loopback listener succeeded.
	ReachedV4 bool `json:"reached_v4"`
	ReachedV6 bool `json:"reached_v6"`
	// Routes: "none" (only loopback), "some" (a non-loopback route) or "unknown" (not readable).
	Routes string `json:"routes"`
	// Rlimits maps cpu, as, fsize, nproc and nofile to [soft, hard]; -1 is unlimited.
	Rlimits map[string][2]int64 `json:"rlimits"`
	// Env lists the names of the child's environment variables.
	Env []string `json:"env"`
	// ProcPIDs counts the processes the child sees in /proc, -1 when /proc is unreadable.
	ProcPIDs int `json:"proc_pids"`
	// WorkspaceWritable: the child could create a file in its working directory.
	WorkspaceWritable bool   `json:"workspace_writable"`
	Python            string `json:"python"`
	// NoNewPrivs, Seccomp and CapEff are those lines of the child's /proc/self/status (-1 and
	// "" when unreadable). A child forked from a template is refused unless they, PID and
	// ProcPIDs show it apart from its siblings (engine: separated). InitSignal is what kill(1,
	// 0) gave: "refused", "allowed" or "absent"; it is reported, not judged (a forked child is
	// its namespace's pid 1 itself).
	NoNewPrivs int    `json:"no_new_privs,omitempty"`
	Seccomp    int    `json:"seccomp,omitempty"`
	CapEff     string `json:"cap_eff,omitempty"`
	InitSignal string `json:"init_signal,omitempty"`
	// LandlockRoot is what opening / for reading gave, its permissions allowing it: "refused"
	// (a Landlock domain whose ruleset grants nothing on / itself, as a forked child's),
	// "allowed" or "unknown" (the permissions deny it, or another error); absent on Windows.
	// A forked child that was to install Landlock is refused unless it says "refused".
	LandlockRoot string `json:"landlock_root,omitempty"`
	// CgroupMemory and CgroupPIDs are the memory (bytes) and pids limits of the child's own
	// cgroup as it sees them (/sys/fs/cgroup, v2 or v1): -1 for none ("max"), absent when
	// unreadable. A container engine in a VM sets them where the host cannot look.
	CgroupMemory int64 `json:"cgroup_memory,omitempty"`
	CgroupPIDs   int64 `json:"cgroup_pids,omitempty"`
}

// Call asks the host to call a tool on the program's behalf.
type Call struct {
	Type string          `json:"type"`
	ID   int64           `json:"id"`
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args"`
}

// Read asks for a window of a handle the program's own calls produced.
type Read struct {
	Type    string `json:"type"`
	ID      int64  `json:"id"`
	Handle  string `json:"handle"`
	Offset  int    `json:"offset"`
	Limit   int    `json:"limit"`
	Pattern string `json:"pattern,omitempty"`
}

// Done ends the program: its value, or the error that ended it.
type Done struct {
	Type  string          `json:"type"`
	OK    bool            `json:"ok"`
	Value json.RawMessage `json:"value,omitempty"`
	// ValueRepr, with OK and a null Value, is the repr of a final value JSON cannot carry.
	ValueRepr *string `json:"value_repr,omitempty"`
	// ValueType, with OK, names the Python type Value was converted from, when it was.
	ValueType string        `json:"value_type,omitempty"`
	Error     *ProgramError `json:"error,omitempty"`
}

// ProgramError is an uncaught exception (or a value that would not serialize) as data.
type ProgramError struct {
	// Type is the exception's class name, e.g. "ZeroDivisionError".
	Type      string `json:"type"`
	Message   string `json:"message"`
	Traceback string `json:"traceback"`
	// Errno is the OSError errno when there is one, else 0.
	Errno int `json:"errno,omitempty"`
	// NotSerializable marks a value that could not be rendered as JSON.
	NotSerializable bool `json:"not_serializable,omitempty"`
}

// Run sends the program and the names it may call.
type Run struct {
	Type    string   `json:"type"`
	Program string   `json:"program"`
	Tools   []string `json:"tools"`
	// Aliases are the tool names that are Python identifiers and not keywords: each is bound
	// under its own name. Never a mangled one.
	Aliases []string `json:"aliases"`
	// Signatures maps tool names to the keywords their bindings take ({params, required,
	// open}); absent, a binding sends any keywords and the host alone checks them.
	Signatures json.RawMessage `json:"signatures,omitempty"`
}

// Abort refuses the execution: nothing runs.
type Abort struct {
	Type   string `json:"type"`
	Kind   string `json:"kind"`
	Reason string `json:"reason"`
}

// Result answers a Call or a Read: OK, and the Answer in its canonical form (ResultOf).
type Result struct {
	Type string `json:"type"`
	ID   int64  `json:"id"`
	OK   bool   `json:"ok"`
	toolcall.Answer
}

// ResultOf is the result frame answering id with a, in its canonical form: a failure carries
// its kind and message only; a success its handle, or else its value (null when nil).
func ResultOf(id int64, a toolcall.Answer) *Result {
	out := &Result{ID: id, OK: a.Kind == ""}
	switch {
	case !out.OK:
		out.Kind, out.Message = a.Kind, a.Message
	case a.Handle != nil:
		out.Handle = a.Handle
	default:
		out.Value = a.Value
		if out.Value == nil {
			out.Value = json.RawMessage("null")
		}
	}
	return out
}

func (*Hello) frameType() string  { return TypeHello }
func (*Call) frameType() string   { return TypeCall }
func (*Read) frameType() string   { return TypeRead }
func (*Done) frameType() string   { return TypeDone }
func (*Run) frameType() string    { return TypeRun }
func (*Abort) frameType() string  { return TypeAbort }
func (*Result) frameType() string { return TypeResult }
