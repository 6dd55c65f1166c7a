package process

import "github.com/mcp-sandbox/mcp-sandbox/engine/backend/spawned"

// Options configure the process backend. cmd/ resolves them from the profile. Besides the
// local backends' own, Disable may name "landlock".
type Options struct {
	spawned.Options
	// WorkspaceBase is where the directory holding per-execution workspaces is made (default:
	// the system temp dir).
	WorkspaceBase string
}

// Available reports whether the process backend runs here (it needs Linux), and why not.
func Available() (bool, string) {
	why := spawned.Absent("process")
	return why == "", why
}
