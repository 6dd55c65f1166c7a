package seatbelt

import (
	"fmt"
	"path"
	"strings"
)

// SandboxExec is the tool that applies a profile and execs the command under it. It ships
// with every macOS since 10.5 (deprecated in its man page since 10.12, and still what Codex
// CLI, Bazel and Chromium's tests start sandboxes with).
const SandboxExec = "/usr/bin/sandbox-exec"

// Args is sandbox-exec's argv (argv[0] included) for running python with argv under the
// profile generated from p: `sandbox-exec -p PROFILE PYTHON ARGV...`. The profile travels as
// an argument, so no file is left to clean up or for another execution to swap. It refuses a
// policy whose interpreter is not an absolute path (sandbox-exec would look it up in PATH,
// and a leading '-' would read as an option) or whose paths hold a control character.
func Args(p Policy, argv []string) ([]string, error) {
	if !path.IsAbs(p.Python) {
		return nil, fmt.Errorf("the interpreter must be an absolute path, got %q", p.Python)
	}
	if p.Workspace == "" || !path.IsAbs(p.Workspace) || p.Temp == "" || !path.IsAbs(p.Temp) {
		return nil, fmt.Errorf("the workspace and its temporary directory must be absolute paths, got %q and %q", p.Workspace, p.Temp)
	}
	for _, s := range append([]string{p.Python, p.Workspace, p.Temp}, p.ReadOnly...) {
		if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return nil, fmt.Errorf("path %q holds a control character, which a profile cannot name", s)
		}
	}
	return append([]string{SandboxExec, "-p", Profile(p), p.Python}, argv...), nil
}

// IsolatedWhy is why macOS has no isolated level of its own: the reason doctor shows and a
// profile requiring isolation is refused with.
const IsolatedWhy = "macOS has no kernel boundary for a local child: Seatbelt confines its reads, but that is graded " +
	"unverified (a canary cannot prove it), and no memory cap exists there; use the container backend " +
	"(Docker Desktop or Podman machine) or a remote backend for the isolated level"
