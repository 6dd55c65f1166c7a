package assembly

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/internal/httpguard"
	"github.com/mcp-sandbox/mcp-sandbox/mcpserver"
	"github.com/mcp-sandbox/mcp-sandbox/metrics"
)

// ServeOptions are what `serve`'s flags and the process hand Serve.
type ServeOptions struct {
	Transport     string // stdio | http
	Listen        string // http's address
	Tenant, Agent string // stdio's agent, resolved by the command
	BlobRetention time.Duration
	Limits        httpguard.Limits // http's listener
	MetricsListen string           // "": no metrics listener
	TenantLabels  bool
	Version       string
	// Stdin and Stdout carry stdio's protocol bytes.
	Stdin  io.ReadCloser
	Stdout io.Writer
	// Hangups delivers SIGHUP, at which Reload (nil: the embedded default, which cannot
	// change) re-reads the config at ConfigPath.
	Hangups    <-chan os.Signal
	Reload     func() (*Config, error)
	ConfigPath string
}

// Serve runs the MCP server cfg describes until ctx ends: the stores, the webhook, metrics,
// every profile and upstream pool in use, and one transport.
func Serve(ctx context.Context, cfg *Config, o *ServeOptions) error {
	st, err := OpenStorage(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	defer st.background(ctx, o.BlobRetention, cfg.Retention())()
	keys, err := stateKeys(cfg)
	if err != nil {
		return err
	}
	opts := &mcpserver.Options{Version: o.Version, Ledger: st.Ledger, Drain: mcpserver.NewDrain(), Quotas: serveQuotas(cfg), StateKeys: keys,
		TaskRetention: cfg.Retention()}
	if opts.Cassettes, err = CassetteKeeper(cfg, st.Ledger); err != nil {
		return err
	}
	hook, err := startWebhook(cfg)
	if err != nil {
		return err
	}
	defer hook.Close()
	if hook != nil {
		opts.Paused = hook.Notify
	}
	if o.MetricsListen != "" {
		m := metrics.New(&metrics.Options{TenantLabels: o.TenantLabels, Version: o.Version})
		stopMetrics, err := serveMetrics(o.MetricsListen, m)
		if err != nil {
			return err
		}
		defer stopMetrics()
		opts.Metrics = m
	}
	watchQuotas(metricsOf(opts), opts.Quotas, sortedKeys(cfg.Tenants))
	// However serve ends, programs still running are cancelled and waited for (bounded)
	// before the ledger and blob store are closed; each transport also drains before it
	// closes its runners and pools.
	defer drainExecutions(opts.Drain)
	if st.Blobs != nil {
		opts.Blobs = st.Blobs
	}
	switch o.Transport {
	case "stdio":
		tname, aname := o.Tenant, o.Agent
		oa, err := OpenAgent(ctx, cfg, tname, aname, Serving, st.Ledger)
		if err != nil {
			return err
		}
		defer oa.Close()
		a := oa.Agent
		watchSandboxes(metricsOf(opts), oa.profiles, oa.pools)
		reload := newReloader(o, cfg, oa.pools, false)
		reload.add(a)
		defer reload.start(ctx, o.Hangups)()
		srv := mcpserver.NewServer(a, opts)
		slog.Info("serving over stdio", "tenant", tname, "agent", aname, "agent_version", a.Version)
		// A signal ends the programs in flight at once: the host that started us is leaving.
		stopDrain := context.AfterFunc(ctx, opts.Drain.Stop)
		defer stopDrain()
		err = mcpserver.ServeStdio(ctx, srv, o.Stdin, o.Stdout)
		drainExecutions(opts.Drain) // before the deferred closes of runners and pools
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
			return err
		}
		return nil
	case "http":
		return serveHTTP(ctx, cfg, o, opts)
	}
	return configErrorf("--transport must be stdio or http, got %q", o.Transport)
}

// serveQuotas converts the config's quotas (the server's, and each tenant's with defaults
// filled) into what mcpserver admits executions and sessions by. Stored bytes are the blob
// store's (OpenStorage).
func serveQuotas(cfg *Config) *mcpserver.Quotas {
	s := cfg.ServerQuotas()
	tenants := map[string]mcpserver.Quota{}
	for name := range cfg.Tenants {
		tenants[name] = tenantQuota(cfg.TenantQuotas(name))
	}
	// A tenant the config does not name (tenants_dir gained one; it is served after a
	// restart) gets the defaults.
	return mcpserver.NewQuotas(mcpserver.Quota{MaxExecutions: *s.MaxConcurrentExecutions, MaxSessions: *s.MaxSessions},
		tenants, tenantQuota(cfg.TenantQuotas("")))
}

func tenantQuota(q configs.TenantQuotas) mcpserver.Quota {
	return mcpserver.Quota{MaxExecutions: *q.MaxConcurrentExecutions, MaxSessions: *q.MaxSessions,
		Wait: time.Duration(*q.QueueSeconds * float64(time.Second))}
}

// profileSet holds the sandboxes of the profiles in use, each opened and described once.
type profileSet struct {
	sandboxes map[string]engine.Sandbox
	runners   map[string]profileSandbox
	described map[string]*engine.Description
}

func (p *profileSet) close() {
	for _, r := range p.runners {
		r.Close()
	}
}

func profileOf(ce *configs.CodeExecution) string {
	if ce.Profile == "" {
		return configs.DefaultProfileName
	}
	return ce.Profile
}

// Mode is how a command uses the profiles it opens.
type Mode int

const (
	// Serving: each profile keeps its warm pools (warm: {min, max, idle_seconds}) and is
	// described once at startup (logs, readiness); a server none of whose profiles can run
	// still serves, its run_code answering with the refusal, and logs why.
	Serving Mode = iota
	// OneShot (run): no warm child and no describe probe, so a program's cold start is its
	// own child's; a profile that cannot be opened is the result's refusal.
	OneShot
	// Replaying (replay): as OneShot, and no upstream: every call is answered from a cassette.
	Replaying
)

// Agent is one agent of a tenant, converted as serve converts it, with what it holds open:
// the profile its code execution uses and its tenant's upstream pool.
type Agent struct {
	mcpserver.Agent
	profiles *profileSet
	pools    *tenantPools
}

// OpenAgent opens one agent: stdio serve and run both take it, so a program run from the
// shell gets the agent (terms, refusal, budget, preserve, bindings, policy, upstreams) that a
// host gets. Nothing of the upstreams is started: a pool connects when a turn first needs
// its catalogue. The pools keep the result shapes they observe in ledger (nil: in memory
// only).
func OpenAgent(ctx context.Context, cfg *Config, tname, aname string, mode Mode, ledger budget.Ledger) (*Agent, error) {
	profiles, err := openProfiles(ctx, cfg, map[string][]string{tname: {aname}}, mode)
	if err != nil {
		return nil, err
	}
	pools := &tenantPools{}
	if mode != Replaying {
		if pools, err = openUpstreams(cfg, []string{tname}, ledger); err != nil {
			profiles.close()
			return nil, err
		}
	}
	oa := &Agent{profiles: profiles, pools: pools}
	if oa.Agent, err = serveAgent(cfg, profiles, tname, aname); err != nil {
		oa.Close()
		return nil, err
	}
	oa.Upstreams = pools.agentUpstreams(cfg, tname, aname)
	return oa, nil
}

// Close closes the upstream pool, then the profile's sandbox.
func (oa *Agent) Close() {
	oa.pools.close()
	oa.profiles.close()
}

// openProfiles opens every profile the given agents use (tenant → agents), as mode says. An
// agent naming an unknown profile is a config error naming both.
func openProfiles(ctx context.Context, cfg *Config, use map[string][]string, mode Mode) (*profileSet, error) {
	ps := &profileSet{sandboxes: map[string]engine.Sandbox{}, runners: map[string]profileSandbox{}, described: map[string]*engine.Description{}}
	for _, tname := range sortedKeys(use) {
		for _, aname := range use[tname] {
			ce := cfg.Tenants[tname].Agents[aname].CodeExecution
			if ce == nil {
				continue
			}
			name := profileOf(ce)
			if _, done := ps.sandboxes[name]; done {
				continue
			}
			p, ok := cfg.Profile(name)
			if !ok {
				ps.close()
				return nil, configErrorf("agent %q of tenant %q names profile %q, which is not defined (profiles: %v)",
					aname, tname, name, sortedKeys(cfg.Profiles))
			}
			runner, err := cfg.openProfile(ctx, name, p, openOptions{warm: mode == Serving, cacheDir: dataDir(cfg)})
			if err != nil {
				u := engine.NewUnopened(err)
				slog.Error("profile unavailable: programs will be refused", "profile", name, "kind", u.Kind(), "err", err)
				ps.sandboxes[name] = u
				ps.described[name] = &engine.Description{Backend: p.Backend, Problems: []string{u.Unavailable()}}
				continue
			}
			ps.runners[name] = runner
			ps.sandboxes[name] = runner
			if mode != Serving {
				continue
			}
			d := runner.Describe(ctx)
			ps.described[name] = d
			if d.Ready {
				slog.Info("profile ready", "profile", name, "backend", d.Backend, "isolation", d.Isolation)
			} else {
				slog.Warn("profile not ready", "profile", name, "backend", d.Backend, "problems", strings.Join(d.Problems, "; "))
			}
		}
	}
	if mode == Serving && len(ps.runners) == 0 && len(ps.sandboxes) > 0 {
		// Not one profile in use can run anything here. The server still serves: run_code
		// stays offered and answers with the refusal (the spec's contract), and the agents'
		// other tools keep working; the operator reads why here and in `doctor`.
		var why []string
		for _, name := range sortedKeys(ps.described) {
			why = append(why, strings.Join(ps.described[name].Problems, "; "))
		}
		slog.Error("no sandbox profile can run on this host: run_code will answer every call with the refusal; "+
			"the other tools keep working; `mcp-sandbox doctor` says what each profile lacks", "why", strings.Join(why, "; "))
	}
	return ps, nil
}

// ProgramPrefixes is, for each agent of tenant that runs code, the prefix its session offers
// the tenant's saved programs under ("" for programs.DefaultPrefix), as serveAgent sets it.
func ProgramPrefixes(cfg *Config, tenant string) map[string]string {
	prefixes := map[string]string{}
	for name, a := range cfg.Tenants[tenant].Agents {
		if a.CodeExecution == nil {
			continue
		}
		prefixes[name] = ""
		if a.Programs != nil {
			prefixes[name] = a.Programs.Prefix
		}
	}
	return prefixes
}

// serveAgent converts one configured agent into what mcpserver serves.
func serveAgent(cfg *Config, ps *profileSet, tname, aname string) (mcpserver.Agent, error) {
	version, err := cfg.AgentVersion(tname, aname)
	if err != nil {
		return mcpserver.Agent{}, configErrorf("%v", err)
	}
	a := mcpserver.Agent{Tenant: tname, Name: aname, Version: version}
	t := cfg.Tenants[tname]
	if ap := t.Agents[aname].Programs; ap != nil {
		a.Programs = mcpserver.Programs{Prefix: ap.Prefix, Propose: ap.Propose}
	}
	ce := t.Agents[aname].CodeExecution
	if ce == nil {
		return a, nil
	}
	name := profileOf(ce)
	p, _ := cfg.Profile(name) // openProfiles has checked that it exists
	terms, refusal := agentTerms(t, ce)
	if r, ok := ps.runners[name]; ok {
		terms = r.Terms(terms) // the backend's ceiling and the profile's hard limits
		if refusal == "" {
			r.Prewarm(tname, terms)
		}
	} else {
		terms.Limits = engineLimits(p.HardLimits, engine.DefaultLimits).Narrow(terms.Limits)
	}
	if why := engine.NetworkRefusal(terms.Network, p.AllowNetwork, p.Network != nil); refusal == "" && why != "" {
		// The Runner would refuse every run; saying so up front also puts it in run_code's
		// description, so the model is not surprised.
		refusal = fmt.Sprintf("sandbox profile %q: %s", name, why)
	}
	a.CodeExecution = &mcpserver.CodeExec{Sandbox: ps.sandboxes[name], Terms: terms, Refusal: refusal, Profile: name,
		// The agent's config carries no budget: the profile's, narrowed by the tenant policy.
		Budget:           bindingBudget(p.BindingBudget).Narrow(bindingBudget(t.Policy.BindingBudget)),
		PreserveRequired: p.Output.Preserve == configs.PreserveRequired,
	}
	a.ImageInlineBytes = int64(deref(p.Images.InlineBytes))
	return a, nil
}

func serveHTTP(ctx context.Context, cfg *Config, o *ServeOptions, opts *mcpserver.Options) error {
	listen, limits := o.Listen, o.Limits
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return configErrorf("--listen %q: %v", listen, err)
	}
	loopback := isLoopbackName(host)
	hashes := map[string]string{} // token hash → tenant
	for _, tname := range sortedKeys(cfg.Tenants) {
		for _, h := range cfg.Tenants[tname].Tokens {
			hashes[h] = tname
		}
	}
	if len(hashes) == 0 && cfg.Auth.OAuth == nil {
		if !loopback {
			return configErrorf("refusing to listen on %s beyond loopback: no tenant has a token, so anyone who can reach it could run code; "+
				"add tokens (\"sha256:<hex>\") to a tenant or listen on 127.0.0.1", listen)
		}
		if len(cfg.Tenants) == 1 {
			tokenless := sortedKeys(cfg.Tenants)[0]
			slog.Warn("no tenant has a token: loopback requests without a token are tenant "+tokenless+" until a reload adds tokens", "tenant", tokenless)
		}
	}
	use := map[string][]string{}
	for _, tname := range sortedKeys(cfg.Tenants) {
		use[tname] = sortedKeys(cfg.Tenants[tname].Agents)
	}
	ps, err := openProfiles(ctx, cfg, use, Serving)
	if err != nil {
		return err
	}
	defer ps.close()
	pools, err := openUpstreams(cfg, sortedKeys(use), opts.Ledger)
	if err != nil {
		return err
	}
	defer pools.close()
	watchSandboxes(metricsOf(opts), ps, pools)
	reload := newReloader(o, cfg, pools, loopback)
	var agents []mcpserver.Agent
	for _, tname := range sortedKeys(use) {
		for _, aname := range use[tname] {
			a, err := serveAgent(cfg, ps, tname, aname)
			if err != nil {
				return err
			}
			a.Upstreams = pools.agentUpstreams(cfg, tname, aname)
			agents = append(agents, a)
			reload.add(a)
		}
	}
	defer reload.start(ctx, o.Hangups)()
	authenticate := func(token string) (string, bool) {
		want := configs.HashToken(token)
		for h, t := range reload.tokenTable() {
			if subtle.ConstantTimeCompare([]byte(h), []byte(want)) == 1 {
				return t, true
			}
		}
		return "", false
	}
	httpOpts := &mcpserver.HTTPOptions{
		Operator:     operatorTokens(cfg.Approvals.OperatorTokens),
		Agents:       agents,
		Authenticate: authenticate,
		OAuth:        newOAuth(cfg, &reload.subjects),
		Tokenless:    reload.tokenlessTenant,
		Loopback:     loopback,
		Ready:        newReadiness(ps).Ready,
		Server:       opts,
	}
	handler := mcpserver.HTTPHandler(httpOpts)
	// A connection leaves the unauthenticated ones as the handler decides (Admits).
	srv, addr, errc, err := serveGuarded(listen, limits, handler, httpOpts.Admits)
	if err != nil {
		return err
	}
	slog.Info("serving over streamable HTTP", "addr", addr, "url", "http://"+addr+"/mcp")
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		// Requests still open after the grace period: end their programs, then wait for them.
		drainExecutions(opts.Drain)
		_ = srv.Close()
	}
	drainExecutions(opts.Drain) // before the deferred closes of runners and pools
	<-errc
	return nil
}

// drainTimeout bounds the wait for cancelled programs: their trees are killed at once, and
// what remains is writing their records.
const drainTimeout = 10 * time.Second

func drainExecutions(d *mcpserver.Drain) {
	d.Stop()
	if !d.Wait(drainTimeout) {
		slog.Warn("executions still running after shutdown; their calls may be recorded unknown at the next start", "waited", drainTimeout)
	}
	// Then the sessions: each one's Run is recorded as ended before the ledger closes.
	if !d.Close(drainTimeout) {
		slog.Warn("sessions still open after shutdown; their runs stay open in the ledger", "waited", drainTimeout)
	}
}

func isLoopbackName(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// operatorTokens is the check of approvals.operator_tokens (hashes), or nil when there are
// none: the route /v1/approvals is then not served. It compares as tokenTable does.
func operatorTokens(hashes []string) func(token string) bool {
	check := tokenTable(hashes)
	if check == nil {
		return nil
	}
	return func(token string) bool {
		_, ok := check(token)
		return ok
	}
}

// serveGuarded serves h on a listener at addr behind the HTTP guard's bounds (limits), a
// connection leaving the unauthenticated ones as admits decides (internal/httpguard), for
// serve's MCP listener and the sandbox service alike; errc receives Serve's end.
func serveGuarded(addr string, limits httpguard.Limits, h http.Handler, admits func(*http.Request) bool) (srv *http.Server, at string, errc <-chan error, err error) {
	inner, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", nil, err
	}
	ln := httpguard.NewListener(inner, limits)
	srv = limits.Server(h)
	httpguard.Gate(srv, admits)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	return srv, ln.Addr().String(), served, nil
}
