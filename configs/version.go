package configs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// versionFormat is hashed first, so that a change to what the version covers is a deliberate
// change of every version rather than an accident.
const versionFormat = "mcp-sandbox/agent-version/1"

// versionInput is everything that makes an agent the agent it is. Tokens are left out (rotating
// a token does not change the agent) and so are the upstreams' addresses and their current
// tools (those change without the config changing; the run ledger records what was called).
type versionInput struct {
	Format    string   `json:"format"`
	Agent     Agent    `json:"agent"`
	Profile   *Profile `json:"profile"` // the profile code_execution names; nil without it
	Policy    Policy   `json:"policy"`
	Upstreams []string `json:"upstreams"` // the tenant's grants: what bindings: null resolves over
}

// AgentVersion returns a stable identifier of an agent's effective definition: "sha256:" + hex
// over canonical JSON of the agent's block with defaults, its code_execution, the whole
// profile that names (hard limits included), the tenant's policy and the tenant's grants.
// Reordering keys or list entries whose order means nothing (bindings, grants, deny and
// approval patterns, env_allowlist) does not change it; changing any value does, and so does
// spelling out a default that was implicit only where the default belongs to a later layer
// (an agent's limit request equal to the profile's cap is still a request).
func (c *Config) AgentVersion(tenant, agent string) (string, error) {
	d := c.withDefaults()
	t, ok := d.Tenants[tenant]
	if !ok {
		return "", failure.New(failure.ConfigInvalid, "unknown tenant %q", tenant)
	}
	a, ok := t.Agents[agent]
	if !ok {
		return "", failure.New(failure.ConfigInvalid, "tenant %q has no agent %q", tenant, agent)
	}
	in := versionInput{Format: versionFormat, Agent: a, Policy: t.Policy, Upstreams: sortedSet(t.Upstreams)}
	in.Policy.Quotas = TenantQuotas{} // capacity of the host, not what the agent is
	in.Policy.Deny = sortedSet(in.Policy.Deny)
	in.Policy.ApprovalRequired = sortedSet(in.Policy.ApprovalRequired)
	if d := in.Policy.DestructiveNeedsApproval; d != nil && *d {
		in.Policy.DestructiveNeedsApproval = nil // the default, spelled out
	}
	in.Policy.Rules = sortedRules(in.Policy.Rules)
	if a.CodeExecution != nil {
		ce := *a.CodeExecution
		if ce.Bindings != nil {
			b := sortedSet(*ce.Bindings)
			ce.Bindings = &b
		}
		in.Agent.CodeExecution = &ce
		p, ok := d.Profiles[ce.Profile]
		if !ok {
			return "", failure.New(failure.ConfigInvalid, "tenants.%s.agents.%s.code_execution.profile: unknown profile %q", tenant, agent, ce.Profile)
		}
		p.EnvAllowlist = sortedSet(p.EnvAllowlist)
		// Where a remote profile's service listens is an address, like an upstream's: it
		// changes without the agent changing.
		p.Remote = nil
		in.Profile = &p
	}
	data, err := json.Marshal(in)
	if err != nil {
		return "", failure.Wrap(failure.Internal, err, "cannot encode agent definition")
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// sortedRules returns rules in a canonical order, each with its allowed values as a sorted
// set: every rule applies to every call, so their order means nothing.
func sortedRules(rs []Rule) []Rule {
	if len(rs) == 0 {
		return nil
	}
	out := make([]Rule, len(rs))
	for i, r := range rs {
		if r.Allow != nil {
			r.Allow = sortedSet(r.Allow)
		}
		out[i] = r
	}
	key := func(r Rule) string {
		b, _ := json.Marshal(r)
		return string(b)
	}
	slices.SortFunc(out, func(a, b Rule) int { return strings.Compare(key(a), key(b)) })
	return slices.CompactFunc(out, func(a, b Rule) bool { return key(a) == key(b) })
}

// sortedSet returns a sorted copy of s without repeats; nil and empty both become empty, since
// neither grants anything.
func sortedSet(s []string) []string {
	out := slices.Clone(s)
	if out == nil {
		out = []string{}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
