package spawned

import (
	"runtime"
	"slices"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// Options configure what every local backend (process, namespaces, bwrap) has and resolves
// the same way; each backend's Options embeds them beside its own. cmd/ resolves them from
// the profile.
type Options struct {
	// Python is the interpreter; python.Find resolves it when empty.
	Python string
	// RunAs is "uid:gid" or a range "FIRST-LAST"; used when the host is root. Default
	// 65534:65534.
	RunAs string
	// Env holds the env_allowlist variables with their values, resolved by the caller.
	Env map[string]string
	// InitPath is the binary re-executed as the init helper (default: this executable).
	InitPath string
	// Disable turns mechanisms off, to test that their absence is graded and refused: "cgroup",
	// "seccomp" and "identity" on every local backend, and what each backend's Options names.
	Disable []string
	// CacheDir is where the interpreter's directories are remembered between starts
	// (python.InspectCached: asking costs an interpreter start); "" asks every time.
	CacheDir string
}

// Disabled reports whether Disable names what.
func (o *Options) Disabled(what string) bool { return slices.Contains(o.Disable, what) }

// Absent is why a local backend of Linux's (process, namespaces, bwrap) is absent on this
// system, "" on Linux: they need its init helper, rlimits, namespaces and cgroups. Each of
// them builds everywhere and answers with it elsewhere, so the command opens every backend on
// every system with no shim of its own.
func Absent(backend string) string {
	if runtime.GOOS == "linux" {
		return ""
	}
	return "the " + backend + " backend needs Linux (its init helper, rlimits, namespaces and cgroups); this build is for " +
		runtime.GOOS + ": use its local backend, a container engine, or a remote backend"
}

// Unavailable is New's refusal of backend off Linux, saying Absent's reason.
func Unavailable(backend string) error {
	return failure.New(failure.BackendUnavailable, "%s", Absent(backend))
}
