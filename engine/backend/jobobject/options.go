package jobobject

import "time"

// Options configure the jobobject backend. cmd/ resolves them from the profile.
type Options struct {
	// Python is the interpreter, a Windows CPython's python.exe; found on PATH when empty.
	Python string
	// Env holds the env_allowlist variables with their values, resolved by the caller.
	Env map[string]string
	// WorkspaceBase is where the directory holding per-execution workspaces is made (default:
	// the user's temporary directory).
	WorkspaceBase string
	// Self is the binary Probe runs as its hostile children, whose main hands ChildArg to
	// ChildMain (default: this executable).
	Self string
	// ProbeBound bounds each of Probe's cases (default 20 s): a limit not seen holding by then
	// is graded unavailable.
	ProbeBound time.Duration
}

// ChildArg is the first argument of a binary run as one of Probe's hostile children: main
// (or a test's TestMain) hands the rest to ChildMain before anything else.
const ChildArg = "__mcp-sandbox-jobobject-child"
