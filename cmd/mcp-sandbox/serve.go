package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/mcp-sandbox/mcp-sandbox/assembly"
	"github.com/mcp-sandbox/mcp-sandbox/cmd/mcp-sandbox/internal/early"
	"github.com/mcp-sandbox/mcp-sandbox/internal/httpguard"
)

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs, configPath := commandFlags("serve", serveUsage, stdout, stderr)
	transport := fs.String("transport", "stdio", "stdio | http")
	listen := fs.String("listen", "127.0.0.1:8080", "address for --transport http")
	tenant := fs.String("tenant", "", "tenant to serve over stdio (default: the only one)")
	agent := fs.String("agent", "", "agent to serve over stdio (default: the tenant's only one)")
	retention := fs.Duration("blob-retention", assembly.DefaultBlobRetention, "how long kept outputs and large results stay readable")
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
	defer startGC(os.LookupEnv)()
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
	if *transport == "http" && (*tenant != "" || *agent != "") {
		return exitUsage, usagef("--tenant and --agent apply to stdio; over http the bearer token selects the tenant and the path the agent")
	}
	var tname, aname string
	if *transport == "stdio" {
		if tname, aname, err = pickAgent(cfg, *tenant, *agent); err != nil {
			return exitUsage, err
		}
	}
	err = assembly.Serve(ctx, cfg, &assembly.ServeOptions{
		Transport: *transport, Listen: *listen, Tenant: tname, Agent: aname,
		BlobRetention: *retention, Limits: httpguard.Limits{Timeout: *httpTimeout, MaxConns: *maxConns, MaxConnsPerIP: *maxConnsPerIP},
		MetricsListen: *metricsListen, TenantLabels: *tenantLabels, Version: early.Version,
		Stdin: os.Stdin, Stdout: os.Stdout, Hangups: hup, ConfigPath: *configPath, Reload: reloadConfig(*configPath),
	})
	if err != nil {
		return exitCode(err), err
	}
	return exitOK, nil
}

// hangups subscribes to SIGHUP at once and returns the subscription and its end. Until a
// process subscribes, SIGHUP's default action ends it: serve subscribes first thing, so a
// reload asked for while it starts (opening profiles takes seconds) waits for the reloader
// instead of killing the server.
func hangups() (<-chan os.Signal, func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	return hup, func() { signal.Stop(hup) }
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
which follows the live heap at twice its size past that (run does the same); either variable
set, even empty, leaves the runtime's own reading of them.
Its scheduler: with no GOMAXPROCS in the environment, serve runs Go on half the CPUs it may
use, rounded up (one on two), leaving the rest to the interpreters; GOMAXPROCS set, even
empty, leaves the runtime's own reading of it.

SIGHUP re-reads --config (and its tenants_dir): a changed grant, deny or approval list, an
agent's bindings and, over http, the tenants' tokens take effect at the next turn, and hosts
are sent tools/list_changed. New tenants, agents, profiles and upstreams need a restart.
`
