package assembly

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/mcpserver"
	"github.com/mcp-sandbox/mcp-sandbox/upstream"
	"github.com/mcp-sandbox/mcp-sandbox/upstream/oauthclient"
)

// upstreamServer converts one configured upstream. A bearer reference is resolved fresh for
// every request (a rotated secret takes effect at once) and never kept.
func (e Env) upstreamServer(name string, u configs.Upstream) upstream.Server {
	s := upstream.Server{
		Name:              name,
		Command:           append([]string(nil), u.Command...),
		Env:               u.Env,
		URL:               u.URL,
		Deferred:          u.Deferred,
		AllowInsecureHTTP: u.AllowInsecureHTTP,
		Bearer:            e.bearerOf(u.Bearer),
	}
	if a := u.A2A; a != nil {
		s.A2A, s.URL, s.AllowInsecureHTTP, s.Bearer = true, a.URL, a.AllowInsecureHTTP, e.bearerOf(a.Bearer)
	}
	if o := u.OAuth; o != nil {
		s.OAuth = e.oauthSource(s.URL, o)
	}
	return s
}

// oauthSource is the client-credentials token source of an upstream's oauth block; its
// secret is resolved at every exchange, like a bearer.
func (e Env) oauthSource(endpoint string, o *configs.UpstreamOAuth) *oauthclient.Source {
	secret := o.ClientSecret
	return oauthclient.New(&oauthclient.Options{
		URL:      endpoint,
		Issuer:   o.Issuer,
		ClientID: o.ClientID,
		Secret:   e.bearerOf(&secret),
		Scopes:   append([]string(nil), o.Scopes...),
		Resource: o.Resource,
	})
}

// bearerOf is the per-request resolver of a credential reference (a rotated secret takes
// effect at the next request; nothing is kept); nil for none.
func (e Env) bearerOf(c *configs.Credential) func(context.Context) (string, error) {
	if c == nil {
		return nil
	}
	cred := *c
	return func(context.Context) (string, error) {
		tok, err := e.resolve(cred)
		if err != nil {
			return "", &upstream.CredentialError{Reason: e.credentialReason(cred), Err: err}
		}
		return tok, nil
	}
}

// credentialReason says why cred could not be resolved, for the model: the variable's name
// (the operator's config names it; knowing it is how the problem gets fixed), never a value,
// and never a file's path.
func (e Env) credentialReason(cred configs.Credential) string {
	switch {
	case cred.Env != "" && cred.File == "":
		v, ok := e.LookupEnv(cred.Env)
		switch {
		case !ok:
			return "the environment variable " + cred.Env + " is not set"
		case v == "":
			return "the environment variable " + cred.Env + " is empty"
		}
		return "the environment variable " + cred.Env + " holds a value that cannot be sent (a control character)"
	case cred.File != "" && cred.Env == "":
		return "its credential file could not be read, or holds no usable value"
	}
	return "its credential reference is not usable"
}

// tenantPools holds one upstream.Pool per tenant that is granted any upstream, and fans each
// pool's tools/list_changed out to the servers that watch it.
type tenantPools struct {
	pools map[string]*upstream.Pool

	mu       sync.Mutex
	watchers map[string][]func() // tenant → the servers' resync functions
}

// openUpstreams builds the pools of the given tenants. Nothing is started: a pool connects to
// a server when a turn first needs its catalogue. A pool keeps the shapes it observes of its
// tenant's results in ledger, when that keeps them (nil: in memory only); ledger must outlive
// the pools, which merge what they hold into it as they close.
func openUpstreams(cfg *Config, tenants []string, ledger budget.Ledger) (*tenantPools, error) {
	tp := &tenantPools{pools: map[string]*upstream.Pool{}, watchers: map[string][]func(){}}
	for _, tname := range tenants {
		grant := cfg.Tenants[tname].Upstreams
		if len(grant) == 0 {
			continue
		}
		var servers []upstream.Server
		for _, name := range grant {
			u, ok := cfg.Upstreams[name]
			if !ok {
				tp.close()
				return nil, configErrorf("tenant %q is granted upstream %q, which is not defined (upstreams: %v)", tname, name, sortedKeys(cfg.Upstreams))
			}
			srv := cfg.upstreamServer(name, u)
			if u.Sandbox != "" {
				if contained, state := upstreamSandbox(cfg, u); contained {
					p, _ := cfg.Profile(u.Sandbox)
					srv.Launch = cfg.containedLauncher(u.Sandbox, p, u.Paths)
				} else {
					slog.Warn("upstream server runs unconfined", "upstream", name, "tenant", tname, "why", state)
				}
			}
			servers = append(servers, srv)
		}
		pool, err := upstream.NewPool(&upstream.PoolOptions{
			Servers:        servers,
			Logger:         slog.Default().With("tenant", tname),
			OnToolsChanged: func(string) { tp.changed(tname) },
			Shapes:         shapeStore(ledger, tname),
		})
		if err != nil {
			tp.close()
			return nil, configErrorf("tenant %q: %v", tname, err)
		}
		tp.pools[tname] = pool
	}
	return tp, nil
}

func (tp *tenantPools) changed(tenant string) {
	tp.mu.Lock()
	ws := append([]func(){}, tp.watchers[tenant]...)
	tp.mu.Unlock()
	for _, w := range ws {
		w()
	}
}

// close closes every pool, each bounded; it is idempotent.
func (tp *tenantPools) close() {
	for _, p := range tp.pools {
		p.Close()
	}
}

// agentUpstreams is what mcpserver needs of an agent's upstream tools, or nil when its tenant
// is granted none.
func (tp *tenantPools) agentUpstreams(cfg *Config, tname, aname string) *mcpserver.Upstreams {
	pool := tp.pools[tname]
	if pool == nil {
		return nil
	}
	p := policyOf(cfg, tname, aname)
	u := &mcpserver.Upstreams{
		Catalogue:         pool.Catalogue,
		Current:           pool.Current,
		Grant:             p.Grant,
		Deny:              p.Deny,
		ApprovalRequired:  p.ApprovalRequired,
		IgnoreDestructive: p.IgnoreDestructive,
		Rules:             p.Rules,
		Bindings:          p.Bindings,
		ApprovalTimeout:   approvalSeconds(cfg, tname, aname, func(a configs.Approvals) *float64 { return a.TimeoutSeconds }),
		PlanWindow:        approvalSeconds(cfg, tname, aname, func(a configs.Approvals) *float64 { return a.PlanSeconds }),
		Expose:            cfg.Tenants[tname].Agents[aname].ExposeUpstreamTools,
		Watch: func(changed func()) {
			tp.mu.Lock()
			defer tp.mu.Unlock()
			tp.watchers[tname] = append(tp.watchers[tname], changed)
		},
	}
	return u
}

// policyOf is an agent's upstream access in cfg: its tenant's grant and policy and its own
// bindings. An agent cfg no longer has gets nothing.
func policyOf(cfg *Config, tname, aname string) mcpserver.UpstreamPolicy {
	t, ok := cfg.Tenants[tname]
	if !ok {
		return mcpserver.UpstreamPolicy{Bindings: &[]string{}}
	}
	a, ok := t.Agents[aname]
	if !ok {
		return mcpserver.UpstreamPolicy{Bindings: &[]string{}}
	}
	p := mcpserver.UpstreamPolicy{
		Grant:             append([]string(nil), t.Upstreams...),
		Deny:              append([]string(nil), t.Policy.Deny...),
		ApprovalRequired:  append([]string(nil), t.Policy.ApprovalRequired...),
		IgnoreDestructive: t.Policy.DestructiveNeedsApproval != nil && !*t.Policy.DestructiveNeedsApproval,
		Rules:             rulesOf(t.Policy.Rules),
	}
	if a.CodeExecution != nil && a.CodeExecution.Bindings != nil {
		// Built-ins (names without "__") are always callable; the list narrows upstream tools.
		b := []string{}
		for _, n := range *a.CodeExecution.Bindings {
			if _, _, ok := upstream.SplitName(n); ok {
				b = append(b, n)
			}
		}
		p.Bindings = &b
	}
	return p
}

// rulesOf converts a tenant policy's argument rules.
func rulesOf(rs []configs.Rule) []upstream.Rule {
	out := make([]upstream.Rule, 0, len(rs))
	for _, r := range rs {
		out = append(out, upstream.Rule{Tool: r.Tool, Argument: r.Argument, Allow: append([]string(nil), r.Allow...),
			Pattern: r.Pattern, Otherwise: upstream.RuleEffect(r.Otherwise)})
	}
	return out
}

// approvalSeconds is one of an agent's approvals durations (field picks it: how long a call
// waits for a person's approval, timeout_seconds; how long an approved plan covers calls,
// plan_seconds): its code execution profile's, or, for an agent without one, the default
// profile's, or the built-in default.
func approvalSeconds(cfg *Config, tname, aname string, field func(configs.Approvals) *float64) time.Duration {
	name := configs.DefaultProfileName
	if ce := cfg.Tenants[tname].Agents[aname].CodeExecution; ce != nil {
		name = profileOf(ce)
	}
	p, ok := cfg.Profile(name)
	if !ok {
		p, _ = cfg.Profile(configs.DefaultProfileName)
	}
	s := field(configs.DefaultApprovals())
	if v := field(p.Approvals); v != nil {
		s = v
	}
	return time.Duration(*s * float64(time.Second))
}
