package mcpserver

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

// Upstreams is an agent's access to its tenant's upstream tools: where the catalogue comes
// from and the policy that narrows it, as plain values (cmd converts the config).
type Upstreams struct {
	// Catalogue returns the tenant's current catalogue (upstream.Pool.Catalogue). It is called
	// at every turn boundary and must be safe for concurrent use.
	Catalogue func(ctx context.Context) *upstream.Catalogue
	// Current, when set, is the catalogue for a host's tools/list (upstream.Pool.Current):
	// it waits at most its argument for a server still starting, whose tools follow with
	// Watch's change. Nil: tools/list takes Catalogue.
	Current func(ctx context.Context, wait time.Duration) *upstream.Catalogue
	// Grant names the upstream servers the tenant is granted.
	Grant []string
	// Deny and ApprovalRequired are the tenant policy's globs over model-facing names.
	Deny, ApprovalRequired []string
	// IgnoreDestructive and Rules are the rest of the tenant policy (upstream.Policy).
	IgnoreDestructive bool
	Rules             []upstream.Rule
	// Bindings is the agent's bindings list; nil means every callable tool.
	Bindings *[]string
	// ApprovalTimeout bounds how long a call waits for a person's approval (the profile's
	// approvals.timeout_seconds); zero means approval.DefaultTimeout.
	ApprovalTimeout time.Duration
	// PlanWindow is how long a rehearsal's approved plan covers the calls it lists (the
	// profile's approvals.plan_seconds); zero means approval.DefaultPlanWindow.
	PlanWindow time.Duration
	// Expose offers the granted tools of non-deferred servers directly in tools/list.
	Expose bool
	// policy, when set by SetPolicy, replaces Grant, Deny, ApprovalRequired, IgnoreDestructive,
	// Rules and Bindings.
	policy atomic.Pointer[UpstreamPolicy]
	// Watch, when set, is called once by NewServer with a function to call whenever an
	// upstream announced a change of its tools; the server then re-syncs its exposed tools,
	// which sends notifications/tools/list_changed to its sessions. The function may be called
	// from any goroutine.
	Watch func(changed func())
}

// UpstreamPolicy is the part of an agent's upstream access that a config reload may change:
// it takes effect at the next turn boundary.
type UpstreamPolicy struct {
	Grant, Deny, ApprovalRequired []string
	IgnoreDestructive             bool
	Rules                         []upstream.Rule
	Bindings                      *[]string
}

// SetPolicy replaces the grant, policy and bindings from the next turn on. Safe for concurrent
// use with turns in flight, which keep what they resolved.
func (u *Upstreams) SetPolicy(p UpstreamPolicy) { u.policy.Store(&p) }

func (u *Upstreams) current() UpstreamPolicy {
	if p := u.policy.Load(); p != nil {
		return *p
	}
	return UpstreamPolicy{Grant: u.Grant, Deny: u.Deny, ApprovalRequired: u.ApprovalRequired,
		IgnoreDestructive: u.IgnoreDestructive, Rules: u.Rules, Bindings: u.Bindings}
}

// Turn resolves the catalogue for one turn under the current policy, or returns nil when u is
// nil or has no catalogue. `mcp-sandbox run` resolves its one turn with it, as the server
// does at each of its turn boundaries.
func (u *Upstreams) Turn(ctx context.Context) *upstream.Turn {
	if u == nil || u.Catalogue == nil {
		return nil
	}
	return u.resolve(u.Catalogue(ctx))
}

// listingTurn is Turn for a host's tools/list: the catalogue as it stands, waiting at most
// listingWait for a server still starting (Current).
func (u *Upstreams) listingTurn(ctx context.Context) *upstream.Turn {
	if u == nil || u.Current == nil {
		return u.Turn(ctx)
	}
	return u.resolve(u.Current(ctx, listingWait))
}

// listingWait is how long a host's tools/list waits for an upstream's first listing: long
// enough for a server that is quick to start to be in the first answer, short enough that a
// slow one never holds the host (its tools follow with tools/list_changed).
const listingWait = 300 * time.Millisecond

func (u *Upstreams) resolve(cat *upstream.Catalogue) *upstream.Turn {
	p := u.current()
	return cat.ResolvePolicy(upstream.Policy{Grant: p.Grant, Deny: p.Deny, ApprovalRequired: p.ApprovalRequired,
		IgnoreDestructive: p.IgnoreDestructive, Rules: p.Rules, Bindings: p.Bindings})
}
