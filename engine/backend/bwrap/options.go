package bwrap

import (
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/spawned"
	"github.com/mcp-sandbox/mcp-sandbox/internal/userns"
)

// Options configure the bwrap backend. cmd/ resolves them from the profile. Besides the local
// backends' own, Disable may name "bwrap" (as if not installed) and "userns" (as if not root,
// bwrap could not make its user namespace).
type Options struct {
	spawned.Options
	// Bwrap is the bwrap binary; exec.LookPath("bwrap") when empty.
	Bwrap string
	spawned.Tmpfs
	// Host is where the host's user-namespace settings are read (without root bwrap needs
	// them); the zero value reads the real ones.
	Host userns.Host
}
