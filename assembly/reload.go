package assembly

import (
	"context"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"sync/atomic"

	"github.com/mcp-sandbox/mcp-sandbox/mcpserver"
)

// reloader re-reads the config file (and its tenants_dir) on SIGHUP, the way a platform
// hands a tenant a new policy without a restart. What changes at the next turn: each served
// agent's upstream grant, deny and approval globs and bindings (a withdrawn tool is neither
// listed nor callable, and hosts get tools/list_changed), and, over HTTP, the tenants' tokens
// and OAuth subjects and scopes. What needs a restart, and is logged as such: new tenants or agents, profiles, upstream
// definitions, limits, quotas. A config that does not load leaves the running one in place.
type reloader struct {
	path   string                  // for logs
	load   func() (*Config, error) // nil: the embedded default, which cannot change
	pools  *tenantPools
	served []servedAgent
	tokens atomic.Pointer[map[string]string] // token hash → tenant (HTTP)
	// subjects maps an OAuth token subject to its tenant (HTTP with auth.oauth).
	subjects atomic.Pointer[map[string]oauthSubject]
	// tokenless is the tenant a token-less request gets ("" for none), as of the last load.
	tokenless atomic.Pointer[string]
	// loopback: the HTTP listener is on loopback, the only place tokenless access is allowed.
	loopback bool
	loaded   *Config
}

type servedAgent struct {
	tenant, agent string
	upstreams     *mcpserver.Upstreams // nil when the tenant is granted no upstream
}

func newReloader(o *ServeOptions, cfg *Config, pools *tenantPools, loopback bool) *reloader {
	r := &reloader{path: o.ConfigPath, load: o.Reload, pools: pools, loaded: cfg, loopback: loopback}
	r.setTokens(cfg)
	return r
}

func (r *reloader) add(a mcpserver.Agent) {
	r.served = append(r.served, servedAgent{tenant: a.Tenant, agent: a.Name, upstreams: a.Upstreams})
}

// tokenTable maps each token hash to its tenant, as of the last load.
func (r *reloader) tokenTable() map[string]string { return *r.tokens.Load() }

func (r *reloader) setTokens(cfg *Config) {
	m := map[string]string{}
	for _, tname := range sortedKeys(cfg.Tenants) {
		for _, h := range cfg.Tenants[tname].Tokens {
			m[h] = tname
		}
	}
	r.tokens.Store(&m)
	subjects := oauthSubjects(cfg)
	r.subjects.Store(&subjects)
	tokenless := ""
	if len(m) == 0 && cfg.Auth.OAuth == nil && len(cfg.Tenants) == 1 && r.loopback {
		tokenless = sortedKeys(cfg.Tenants)[0]
	}
	r.tokenless.Store(&tokenless)
}

// tokenlessTenant is the tenant of a request without a token: the only tenant, while no
// tenant has a token and the listener is on loopback; otherwise "" (a token is required).
func (r *reloader) tokenlessTenant() string { return *r.tokenless.Load() }

// start reloads on every signal from hup until ctx ends or the returned stop is called; stop
// waits for the reload in progress, if any.
func (r *reloader) start(ctx context.Context, hup <-chan os.Signal) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				r.reload()
			}
		}
	}()
	return func() { cancel(); <-done }
}

func (r *reloader) reload() {
	if r.load == nil {
		slog.Info("SIGHUP: serving the embedded default config, which cannot change; nothing to reload")
		return
	}
	cfg, err := r.load()
	if err != nil {
		slog.Error("config reload failed: the running config stays in force", "config", r.path, "err", err)
		return
	}
	changed := map[string]bool{}
	for _, s := range r.served {
		if _, ok := cfg.Tenants[s.tenant].Agents[s.agent]; !ok {
			slog.Warn("agent no longer in the config: its upstream tools are withdrawn; restart to remove it", "tenant", s.tenant, "agent", s.agent)
		}
		if s.upstreams != nil {
			s.upstreams.SetPolicy(policyOf(cfg, s.tenant, s.agent))
			changed[s.tenant] = true
		}
	}
	for _, tname := range sortedKeys(cfg.Tenants) {
		if _, ok := r.loaded.Tenants[tname]; !ok {
			slog.Warn("new tenant in the config: restart to serve it", "tenant", tname)
			continue
		}
		if !slices.Equal(cfg.Tenants[tname].Upstreams, r.loaded.Tenants[tname].Upstreams) {
			slog.Warn("a tenant's grant changed: servers newly granted connect after a restart; withdrawn ones are withdrawn now", "tenant", tname)
		}
	}
	if !reflect.DeepEqual(quotaReportOf(cfg), quotaReportOf(r.loaded)) {
		slog.Warn("quotas changed: the ones in force stay until a restart")
	}
	if !reflect.DeepEqual(cfg.Auth, r.loaded.Auth) {
		slog.Warn("auth.oauth changed: its resource and issuers stay until a restart (tenants' oauth subjects and scopes take effect now)")
	}
	r.setTokens(cfg)
	r.loaded = cfg
	for tname := range changed {
		r.pools.changed(tname)
	}
	slog.Info("config reloaded", "config", r.path)
}
