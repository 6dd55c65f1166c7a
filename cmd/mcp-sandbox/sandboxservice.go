package main

import (
	"context"
	"io"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/assembly"
	"github.com/mcp-sandbox/mcp-sandbox/internal/httpguard"
)

func runSandboxService(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs, configPath := commandFlags("sandbox-service", sandboxServiceUsage, stdout, stderr)
	listen := fs.String("listen", "", "address to serve on, e.g. 127.0.0.1:8443 (required)")
	maxExec := fs.Int("max-executions", 16, "executions run at once; past it a start is answered 503")
	drainFor := fs.Duration("drain-timeout", 60*time.Second, "on SIGTERM, how long running executions may finish before they are cancelled")
	maxConns := fs.Int("max-connections", httpguard.DefaultMaxConns, "open connections at most (0: no cap)")
	maxConnsPerIP := fs.Int("max-connections-per-address", httpguard.DefaultMaxConnsPerIP, "open connections from one remote address at most (0: no cap)")
	if answered, code, err := parseFlags(fs, args); answered {
		return code, err
	}
	switch {
	case fs.NArg() != 0:
		return exitUsage, usagef("takes no arguments, got %q", fs.Args())
	case *listen == "":
		return exitUsage, usagef("--listen is required, e.g. --listen 127.0.0.1:8443")
	case *maxExec <= 0:
		return exitUsage, usagef("--max-executions must be positive, got %d", *maxExec)
	case *drainFor <= 0:
		return exitUsage, usagef("--drain-timeout must be positive, got %v", *drainFor)
	case *maxConns < 0 || *maxConnsPerIP < 0:
		return exitUsage, usagef("the connection caps must not be negative")
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return exitUsage, err
	}
	err = assembly.ServeSandboxService(ctx, cfg, &assembly.ServiceOptions{Listen: *listen, MaxExecutions: *maxExec, DrainTimeout: *drainFor,
		Limits: httpguard.Limits{MaxConns: *maxConns, MaxConnsPerIP: *maxConnsPerIP}})
	if err != nil {
		return exitCode(err), err
	}
	return exitOK, nil
}

const sandboxServiceUsage = `Usage: mcp-sandbox sandbox-service --listen ADDR [--config FILE] [--max-executions N] [--drain-timeout D]

Serves sandbox executions to MCP servers elsewhere: their profiles say "backend: remote" and
send each program here, where it runs on this machine's own local backend (the profile named
by sandbox_service.profile, default "default": "local" picks the strongest one that reaches its
isolation). Every tool call a program makes travels back to the server that sent it and runs
through that server's policy, budgets and ledger, so this machine holds no upstream credential
and needs no upstreams or tenants. It is the unit that scales out: run as many as you need.

The config (every key is checked, as "mcp-sandbox check" does):

  profiles:
    default: {backend: local, isolation: isolated, hard_limits: {wall_seconds: 120}}
  sandbox_service:
    tokens: ["sha256:<hex>"]     # printf %s "$TOKEN" | sha256sum; never the token itself
    profile: default

and on each MCP server that sends programs here:

  profiles:
    far:
      backend: remote
      isolation: isolated
      remote: {url: "https://sandboxes.internal:8443", bearer: {env: SANDBOX_TOKEN}}

--max-connections (1024) and --max-connections-per-address (256) refuse the next connection
with a 503 that says which limit; as on serve's HTTP listener, a connection without a valid
token is closed after its answer (/healthz too) or 5 s, never holds the last quarter of the
connections, and an idle keep-alive connection closes after 60 s. Without tokens the service listens on loopback only. It speaks plain HTTP: beyond one machine
put TLS in front (a proxy or a mesh); a server sends its credential over plaintext http only to
loopback, unless its profile sets allow_insecure_http.

Routes (the protocol is documented in the package remote):
  GET  /v2/describe                  what this service's sandbox is and can prove
  POST /v2/executions                run a program; the answer is a stream of NDJSON frames
  POST /v2/executions/{id}/results   the result of one of its tool calls
  POST /v2/executions/{id}/cancel    end it and every process it started
  GET  /healthz                      200 while the process is alive
  GET  /readyz                       200 while the sandbox is ready and not draining

Terms it cannot meet (an isolation it does not reach, network its profile does not allow)
are refused before anything runs. On SIGTERM or SIGINT it drains: new executions are refused
and /readyz turns 503, running ones get --drain-timeout to finish and are then cancelled.
`
