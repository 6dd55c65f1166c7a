package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/internal/httpguard"
	"github.com/mcp-sandbox/mcp-sandbox/remote/service"
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
	sc := configs.SandboxService{}
	if cfg.SandboxService != nil {
		sc = *cfg.SandboxService
	}
	name := sc.Profile
	if name == "" {
		name = configs.DefaultProfileName
	}
	p, ok := cfg.Profile(name)
	switch {
	case !ok:
		return exitUsage, usagef("sandbox_service.profile names %q, which is not defined (profiles: %v)", name, sortedKeys(cfg.Profiles))
	case p.Backend == configs.BackendRemote:
		return exitUsage, usagef("profile %q is remote; a sandbox service runs programs on a local backend", name)
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return exitUsage, usagef("--listen %q: %v", *listen, err)
	}
	if len(sc.Tokens) == 0 && !isLoopbackName(host) {
		return exitUsage, usagef("refusing to listen on %s beyond loopback: sandbox_service has no tokens, so anyone who can reach it could run code; "+
			"add tokens (\"sha256:<hex>\") under sandbox_service or listen on 127.0.0.1", *listen)
	}

	sb, err := openProfile(ctx, name, p, openOptions{warm: true, cacheDir: dataDir(cfg)})
	if err != nil {
		return exitFailure, err
	}
	defer sb.Close()
	d := sb.Describe(ctx)
	if d.Ready {
		slog.Info("profile ready", "profile", name, "backend", d.Backend, "isolation", d.Isolation)
	} else {
		slog.Warn("profile not ready: executions will be refused and /readyz answers 503", "profile", name, "backend", d.Backend, "problems", d.Problems)
	}
	svc := service.New(&service.Options{
		Sandbox:       sb,
		AllowNetwork:  p.AllowNetwork,
		Authenticate:  tokenTable(sc.Tokens),
		MaxExecutions: *maxExec,
	})
	inner, err := net.Listen("tcp", *listen)
	if err != nil {
		return exitFailure, err
	}
	// The MCP listener's rules (internal/httpguard): connections past a cap are refused with
	// a 503 that says which, unauthenticated ones are closed within seconds and after any
	// answer and never hold the slots reserved for authenticated ones, and idle ones close
	// after the same timeout. No Timeout: an execution's stream lasts as long as its program;
	// each frame's write has its own deadline instead.
	limits := httpguard.Limits{MaxConns: *maxConns, MaxConnsPerIP: *maxConnsPerIP}
	ln := httpguard.NewListener(inner, limits)
	srv := limits.Server(svc)
	httpguard.Gate(srv, svc.Admits) // no tokens: every request is admitted (the listener is loopback)
	slog.Info("serving sandbox executions", "addr", ln.Addr().String(), "profile", name, "tokens", len(sc.Tokens),
		"max_executions", *maxExec)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return exitFailure, err
	case <-ctx.Done():
	}
	slog.Info("draining: no new executions; running ones may finish", "within", *drainFor)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), *drainFor)
	defer cancel()
	if !svc.Drain(dctx) {
		slog.Warn("executions still running at the drain deadline were cancelled")
	}
	sctx, cancelShutdown := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancelShutdown()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return exitFailure, err
	}
	slog.Info("stopped")
	return exitOK, nil
}

// tokenTable authenticates a bearer token by its hash, comparing in constant time. Every
// token is the same principal: a caller resolves its credential afresh for each request, so
// a token rotated during an execution (old and new both listed) still answers it; the
// execution's id, unguessable and sent only on its own stream, is what ties a reply to it.
// No tokens: nil, every request is admitted (the listener is loopback).
func tokenTable(hashes []string) func(string) (string, bool) {
	if len(hashes) == 0 {
		return nil
	}
	return func(token string) (string, bool) {
		want := configs.HashToken(token)
		found := false
		for _, h := range hashes {
			found = subtle.ConstantTimeCompare([]byte(h), []byte(want)) == 1 || found
		}
		return "caller", found
	}
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
