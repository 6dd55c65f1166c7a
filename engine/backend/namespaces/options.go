package namespaces

import (
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/spawned"
	"github.com/mcp-sandbox/mcp-sandbox/internal/launch"
	"github.com/mcp-sandbox/mcp-sandbox/internal/userns"
)

// Options configure the namespaces backend. cmd/ resolves them from the profile. Besides the
// local backends' own, Disable may name "namespaces" (the host cannot create them: New fails),
// "userns" (New fails when a user namespace is needed, that is when not root) and "subids"
// (the user's subordinate ids count as absent).
type Options struct {
	spawned.Options
	// RootBase is where the per-execution (empty) root mount points are made on the host
	// (default: the system temp dir).
	RootBase string
	spawned.Tmpfs
	// Host is where the host's user-namespace settings and subordinate ids are read; the
	// zero value reads the real ones (tests point it at a fake tree).
	Host userns.Host
	// Template: a warm pool's children are forked from a template kept per owner and terms
	// (the profile's warm.start: auto or template; exec leaves it off) instead of exec'd,
	// where this host allows it (TemplateWhy); elsewhere they are exec'd and the log says
	// why, once per reason.
	Template bool
	// forkAll (tests: export_linux_test.go) forks every child, not only a warm pool's;
	// recycleAfter, when positive, replaces templateChildren.
	forkAll      bool
	recycleAfter int
	// Tests (export_linux_test.go): expose binds host paths into a template's root (visible
	// to its children, beyond what their Landlock rules grant); noLandlock sends its children
	// an empty ruleset; withholdLandlock does too while their facts still claim Landlock (a
	// ruleset that failed to go in, which the probe must catch); grantRead adds paths to
	// what the children's rulesets grant read-only; landlockABI, when positive, stands for the
	// kernel's Landlock ABI.
	expose           []launch.Bind
	noLandlock       bool
	withholdLandlock bool
	grantRead        []string
	landlockABI      int
}
