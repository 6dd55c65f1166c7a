package spawned

import "slices"

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
