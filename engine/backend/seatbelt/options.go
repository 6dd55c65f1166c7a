package seatbelt

// Options configure the seatbelt backend. cmd/ resolves them from the profile.
type Options struct {
	// Python is the interpreter; discovered when empty (Homebrew's, python.org's, then PATH).
	Python string
	// Env holds the env_allowlist variables with their values, resolved by the caller.
	Env map[string]string
	// WorkspaceBase is where the directory holding per-execution workspaces is made (default:
	// the user's temporary directory).
	WorkspaceBase string
	// InitPath is the binary re-executed as the init helper (default: this executable).
	InitPath string
	// CacheDir is where the interpreter's directories are remembered between starts; "" asks
	// every time.
	CacheDir string
}
