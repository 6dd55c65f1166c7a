package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"

	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/cmd/mcp-sandbox/internal/early"
	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/internal/httpguard"
	"github.com/mcp-sandbox/mcp-sandbox/mcpserver"
	"github.com/mcp-sandbox/mcp-sandbox/metrics"
)

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs, configPath := commandFlags("serve", serveUsage, stdout, stderr)
	transport := fs.String("transport", "stdio", "stdio | http")
	listen := fs.String("listen", "127.0.0.1:8080", "address for --transport http")
	tenant := fs.String("tenant", "", "tenant to serve over stdio (default: the only one)")
	agent := fs.String("agent", "", "agent to serve over stdio (default: the tenant's only one)")
	retention := fs.Duration("blob-retention", DefaultBlobRetention, "how long kept outputs and large results stay readable")
	httpTimeout := fs.Duration("http-timeout", httpguard.DefaultTimeout, "http: how long a request may take to arrive, one write of a response to leave, and a keep-alive connection to idle (a streamed run_code is not cut by it)")
	maxConns := fs.Int("max-connections", httpguard.DefaultMaxConns, "http: open connections at most (0: no cap)")
	maxConnsPerIP := fs.Int("max-connections-per-address", httpguard.DefaultMaxConnsPerIP, "http: open connections from one remote address at most (0: no cap; raise it behind a proxy)")
	metricsListen := fs.String("metrics-listen", "", "serve Prometheus metrics on this address (/metrics, no authentication: loopback or the scraper's network only); with either transport")
	tenantLabels := fs.Bool("metrics-tenant-labels", false, "label metrics with tenant and agent (more series; a scraper learns every tenant's name)")
	if answered, code, err := parseFlags(fs, args); answered {
		return code, err
	}
	if fs.NArg() != 0 {
		return exitUsage, usagef("takes no arguments, got %q", fs.Args())
	}
	if *transport == "stdio" && !fs.Changed("log-level") {
		// A host keeps a stdio server's stderr as its MCP log, and some (Claude Code) record
		// every line there as an error: over stdio, warnings and errors unless asked for more.
		warnByDefault(fs)
		if err := setLogger(fs); err != nil {
			return exitUsage, err
		}
	}
	defer startServeGC(os.LookupEnv)()
	defer startServeProcs(os.LookupEnv)()
	hup, unsubscribe := hangups()
	defer unsubscribe()
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return exitUsage, err
	}
	if len(cfg.Tenants) == 0 {
		return exitUsage, errNoTenant
	}
	if *transport != "stdio" && *transport != "http" {
		return exitUsage, usagef("--transport must be stdio or http, got %q", *transport)
	}
	if *retention <= 0 {
		return exitUsage, usagef("--blob-retention must be positive, got %v", *retention)
	}
	if *httpTimeout <= 0 || *maxConns < 0 || *maxConnsPerIP < 0 {
		return exitUsage, usagef("--http-timeout must be positive and the connection caps not negative")
	}
	if *metricsListen != "" && *transport == "http" && *metricsListen == *listen {
		return exitUsage, usagef("--metrics-listen must differ from --listen: metrics are the operator's, on a listener of their own")
	}
	stopTracing, err := startTracing(ctx)
	if err != nil {
		return exitCode(err), err
	}
	defer stopTracing()
	st, err := openStorage(ctx, cfg)
	if err != nil {
		return exitCode(err), err
	}
	defer st.close()
	defer st.background(ctx, *retention, cfg.Retention())()
	keys, err := stateKeys(cfg)
	if err != nil {
		return exitCode(err), err
	}
	opts := &mcpserver.Options{Version: early.Version, Ledger: st.ledger, Drain: mcpserver.NewDrain(), Quotas: serveQuotas(cfg), StateKeys: keys}
	if opts.Cassettes, err = cassetteKeeper(cfg, st.ledger); err != nil {
		return exitFailure, err
	}
	hook, err := startWebhook(cfg)
	if err != nil {
		return exitCode(err), err
	}
	defer hook.Close()
	if hook != nil {
		opts.Paused = hook.Notify
	}
	if *metricsListen != "" {
		m := metrics.New(&metrics.Options{TenantLabels: *tenantLabels, Version: early.Version})
		stopMetrics, err := serveMetrics(*metricsListen, m)
		if err != nil {
			return exitFailure, err
		}
		defer stopMetrics()
		opts.Metrics = m
	}
	watchQuotas(metricsOf(opts), opts.Quotas, sortedKeys(cfg.Tenants))
	// However serve ends, programs still running are cancelled and waited for (bounded)
	// before the ledger and blob store are closed; each transport also drains before it
	// closes its runners and pools.
	defer drainExecutions(opts.Drain)
	if st.blobs != nil {
		opts.Blobs = st.blobs
	}
	switch *transport {
	case "stdio":
		tname, aname, err := pickAgent(cfg, *tenant, *agent)
		if err != nil {
			return exitUsage, err
		}
		oa, err := openAgent(ctx, cfg, tname, aname, serving, st.ledger)
		if err != nil {
			return exitCode(err), err
		}
		defer oa.close()
		a := oa.agent
		watchSandboxes(metricsOf(opts), oa.profiles, oa.pools)
		reload := newReloader(*configPath, cfg, oa.pools, false)
		reload.add(a)
		defer reload.start(ctx, hup)()
		srv := mcpserver.NewServer(a, opts)
		slog.Info("serving over stdio", "tenant", tname, "agent", aname, "agent_version", a.Version)
		// A signal ends the programs in flight at once: the host that started us is leaving.
		stopDrain := context.AfterFunc(ctx, opts.Drain.Stop)
		defer stopDrain()
		err = mcpserver.ServeStdio(ctx, srv, os.Stdin, os.Stdout)
		drainExecutions(opts.Drain) // before the deferred closes of runners and pools
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
			return exitFailure, err
		}
		return exitOK, nil
	case "http":
		if *tenant != "" || *agent != "" {
			return exitUsage, usagef("--tenant and --agent apply to stdio; over http the bearer token selects the tenant and the path the agent")
		}
		return serveHTTP(ctx, cfg, *configPath, *listen, hup, opts, httpguard.Limits{Timeout: *httpTimeout, MaxConns: *maxConns, MaxConnsPerIP: *maxConnsPerIP})
	}
	return exitUsage, usagef("--transport must be stdio or http, got %q", *transport)
}

// serveQuotas converts the config's quotas (the server's, and each tenant's with defaults
// filled) into what mcpserver admits executions and sessions by. Stored bytes are the blob
// store's (openStorage).
func serveQuotas(cfg *configs.Config) *mcpserver.Quotas {
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

// profileMode is how a command uses the profiles it opens.
type profileMode int

const (
	// serving: each profile keeps its warm pools (warm: {min, max, idle_seconds}) and is described once at startup
	// (logs, readiness); a server none of whose profiles can run still serves, its run_code
	// answering with the refusal, and logs why.
	serving profileMode = iota
	// oneShot (run): no warm child and no describe probe, so a program's cold start is its own
	// child's; a profile that cannot be opened is the result's refusal.
	oneShot
)

// openedAgent is one agent of a tenant, converted as serve converts it, with what it holds
// open: the profile its code execution uses and its tenant's upstream pool.
type openedAgent struct {
	agent    mcpserver.Agent
	profiles *profileSet
	pools    *tenantPools
}

// openAgent opens one agent: stdio serve and run both take it, so a program run from the
// shell gets the agent (terms, refusal, budget, preserve, bindings, policy, upstreams) that a
// host gets. Nothing of the upstreams is started: a pool connects when a turn first needs
// its catalogue.
func openAgent(ctx context.Context, cfg *configs.Config, tname, aname string, mode profileMode, ledger budget.Ledger) (*openedAgent, error) {
	profiles, err := openProfiles(ctx, cfg, map[string][]string{tname: {aname}}, mode)
	if err != nil {
		return nil, err
	}
	pools, err := openUpstreams(cfg, []string{tname}, ledger)
	if err != nil {
		profiles.close()
		return nil, err
	}
	oa := &openedAgent{profiles: profiles, pools: pools}
	if oa.agent, err = serveAgent(cfg, profiles, tname, aname); err != nil {
		oa.close()
		return nil, err
	}
	oa.agent.Upstreams = pools.agentUpstreams(cfg, tname, aname)
	return oa, nil
}

// close closes the upstream pool, then the profile's sandbox.
func (oa *openedAgent) close() {
	oa.pools.close()
	oa.profiles.close()
}

// openProfiles opens every profile the given agents use (tenant → agents), as mode says. An
// agent naming an unknown profile is a config error naming both.
func openProfiles(ctx context.Context, cfg *configs.Config, use map[string][]string, mode profileMode) (*profileSet, error) {
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
				return nil, usagef("agent %q of tenant %q names profile %q, which is not defined (profiles: %v)",
					aname, tname, name, sortedKeys(cfg.Profiles))
			}
			runner, err := openProfile(ctx, name, p, openOptions{warm: mode == serving, cacheDir: dataDir(cfg)})
			if err != nil {
				u := engine.NewUnopened(err)
				slog.Error("profile unavailable: programs will be refused", "profile", name, "kind", u.Kind(), "err", err)
				ps.sandboxes[name] = u
				ps.described[name] = &engine.Description{Backend: p.Backend, Problems: []string{u.Unavailable()}}
				continue
			}
			ps.runners[name] = runner
			ps.sandboxes[name] = runner
			if mode == oneShot {
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
	if mode == serving && len(ps.runners) == 0 && len(ps.sandboxes) > 0 {
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

// serveAgent converts one configured agent into what mcpserver serves.
func serveAgent(cfg *configs.Config, ps *profileSet, tname, aname string) (mcpserver.Agent, error) {
	version, err := cfg.AgentVersion(tname, aname)
	if err != nil {
		return mcpserver.Agent{}, usagef("%v", err)
	}
	a := mcpserver.Agent{Tenant: tname, Name: aname, Version: version}
	t := cfg.Tenants[tname]
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

func serveHTTP(ctx context.Context, cfg *configs.Config, configPath, listen string, hup <-chan os.Signal, opts *mcpserver.Options, limits httpguard.Limits) (int, error) {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return exitUsage, usagef("--listen %q: %v", listen, err)
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
			return exitUsage, usagef("refusing to listen on %s beyond loopback: no tenant has a token, so anyone who can reach it could run code; "+
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
	ps, err := openProfiles(ctx, cfg, use, serving)
	if err != nil {
		return exitCode(err), err
	}
	defer ps.close()
	pools, err := openUpstreams(cfg, sortedKeys(use), opts.Ledger)
	if err != nil {
		return exitUsage, err
	}
	defer pools.close()
	watchSandboxes(metricsOf(opts), ps, pools)
	reload := newReloader(configPath, cfg, pools, loopback)
	var agents []mcpserver.Agent
	for _, tname := range sortedKeys(use) {
		for _, aname := range use[tname] {
			a, err := serveAgent(cfg, ps, tname, aname)
			if err != nil {
				return exitUsage, err
			}
			a.Upstreams = pools.agentUpstreams(cfg, tname, aname)
			agents = append(agents, a)
			reload.add(a)
		}
	}
	defer reload.start(ctx, hup)()
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
	inner, err := net.Listen("tcp", listen)
	if err != nil {
		return exitFailure, err
	}
	ln := httpguard.NewListener(inner, limits)
	srv := limits.Server(handler)
	// A connection leaves the unauthenticated ones as the handler decides (Admits).
	httpguard.Gate(srv, httpOpts.Admits)
	slog.Info("serving over streamable HTTP", "addr", ln.Addr().String(), "url", "http://"+ln.Addr().String()+"/mcp")
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return exitFailure, err
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
	return exitOK, nil
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

const serveUsage = `Usage: mcp-sandbox serve [--config FILE] [--transport stdio|http] [--listen ADDR] [--tenant T] [--agent A]

Serves the MCP tools run_code, list_tools, get_tool_info and read_tool_output (run_code only
for an agent with a code_execution block) to an MCP host.

stdio (the default) serves one agent of one tenant to the host that started this process:
stdout carries protocol bytes only, logs go to stderr. For Claude Desktop:

  {"mcpServers": {"sandbox": {"command": "mcp-sandbox", "args": ["serve"]}}}

http serves every tenant's agents over streamable HTTP on --listen:
  /mcp           the token's tenant's default agent (its only one, or the one named "default")
  /mcp/{agent}   one agent of the token's tenant
  /healthz       200 while the process is alive
  /readyz        200 once every sandbox profile has described itself ready (one that was
                 not at startup is asked again, at most every 5 s)
Each connection is bounded: --http-timeout (default 60s) for a request to arrive, for each
write of a response to leave and for an idle keep-alive connection; a streamed run_code stays
open for as long as it runs. --max-connections (1024) and --max-connections-per-address
(256; raise it behind a proxy, which is one address) refuse the next connection with 503.
A connection that has not carried a request with a valid token (or, tokenless, any request)
within 5 s is closed, as is one after any answer to a request without one (/healthz too), and
such connections never hold the last quarter of --max-connections: when they would, the oldest
is closed to make room, so connections opened without a token cannot shut a tenant out.
Quotas (the config's quotas: block, and each tenant's policy.quotas) bound programs running at
once (a run waits its tenant's queue_seconds for a slot, then is refused with
capacity_exceeded), sessions (past a tenant's limit 429, past the server's 503) and bytes kept
in the blob store; "mcp-sandbox doctor" lists them.
Requests carry "Authorization: Bearer <token>"; the config stores tokens as
"sha256:<hex>" (printf %s "$TOKEN" | sha256sum). On a loopback listener a config with a single
tenant and no tokens needs none; listening beyond loopback needs tokens (or auth.oauth).
With auth.oauth the server is also an OAuth 2.1 resource server: an access token (a JWT from
one of its issuers, for its resource) admits the tenant whose oauth.subjects hold the token's
tenant_claim, when it carries the tenant's oauth.scopes (else 403 insufficient_scope);
/.well-known/oauth-protected-resource (and the resource path's form) serves the metadata
(RFC 9728) that 401 answers name. Every refusal is logged with the check that failed.

Runs, budgets and kept outputs live in data_dir (default $XDG_STATE_HOME/mcp-sandbox or
~/.local/state/mcp-sandbox; "-" for none): the run ledger and the blob store. A restart on
the same data_dir records calls that were in flight as unknown and never replays them; kept
outputs stay readable for --blob-retention. With ledger.postgres and blobs.postgres in the
config, replicas on several machines share them instead: a replica that dies has its calls in
flight recorded unknown by a survivor within about a lease and a quarter.

At startup every profile an agent uses is opened and described once; an agent naming a
profile that does not exist stops the server (exit 2). Run "mcp-sandbox doctor" to see what
each profile can contain on this machine.

What the operator watches: --log-format json|text and --log-level on stderr (every line of
one execution names its execution, tenant, agent and run; the level is info by default over
http, warn over stdio, whose host keeps stderr as its MCP log); --metrics-listen ADDR serves
Prometheus metrics (/metrics, no authentication: loopback or the scraper's network only) with
either transport; OTEL_EXPORTER_OTLP_ENDPOINT exports traces over OTLP/HTTP, under the trace
context a host sends in _meta (traceparent), which upstream calls pass on.

Go's collector: with neither GOGC nor GOMEMLIMIT in the environment, serve lets the heap grow
to five times what is live (GOGC=400) under a soft limit of 48 MiB of the runtime's memory,
which follows the live heap at twice its size past that; either variable set, even empty,
leaves the runtime's own reading of them.
Its scheduler: with no GOMAXPROCS in the environment, serve runs Go on half the CPUs it may
use, rounded up (one on two), leaving the rest to the interpreters; GOMAXPROCS set, even
empty, leaves the runtime's own reading of it.

SIGHUP re-reads --config (and its tenants_dir): a changed grant, deny or approval list, an
agent's bindings and, over http, the tenants' tokens take effect at the next turn, and hosts
are sent tools/list_changed. New tenants, agents, profiles and upstreams need a restart.
`

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
