package assembly

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/internal/httpguard"
	"github.com/mcp-sandbox/mcp-sandbox/remote/service"
)

// ServiceOptions are what `sandbox-service`'s flags hand ServeSandboxService.
type ServiceOptions struct {
	Listen        string
	MaxExecutions int           // run at once; past it a start is answered 503
	DrainTimeout  time.Duration // at the end of ctx, how long running executions may finish
	Limits        httpguard.Limits
}

// ServeSandboxService serves executions to the remote backends of servers elsewhere (package
// remote/service) on the profile sandbox_service names, until ctx ends and the running
// executions are drained.
func ServeSandboxService(ctx context.Context, cfg *Config, o *ServiceOptions) error {
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
		return configErrorf("sandbox_service.profile names %q, which is not defined (profiles: %v)", name, sortedKeys(cfg.Profiles))
	case p.Backend == configs.BackendRemote:
		return configErrorf("profile %q is remote; a sandbox service runs programs on a local backend", name)
	}
	host, _, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return configErrorf("--listen %q: %v", o.Listen, err)
	}
	if len(sc.Tokens) == 0 && !isLoopbackName(host) {
		return configErrorf("refusing to listen on %s beyond loopback: sandbox_service has no tokens, so anyone who can reach it could run code; "+
			"add tokens (\"sha256:<hex>\") under sandbox_service or listen on 127.0.0.1", o.Listen)
	}

	sb, err := cfg.openProfile(ctx, name, p, openOptions{warm: true, cacheDir: dataDir(cfg)})
	if err != nil {
		return err
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
		MaxExecutions: o.MaxExecutions,
	})
	// The MCP listener's rules (internal/httpguard): connections past a cap are refused with
	// a 503 that says which, unauthenticated ones are closed within seconds and after any
	// answer and never hold the slots reserved for authenticated ones, and idle ones close
	// after the same timeout. No Timeout: an execution's stream lasts as long as its program;
	// each frame's write has its own deadline instead. No tokens: every request is admitted
	// (the listener is loopback).
	srv, addr, errc, err := serveGuarded(o.Listen, o.Limits, svc, svc.Admits)
	if err != nil {
		return err
	}
	slog.Info("serving sandbox executions", "addr", addr, "profile", name, "tokens", len(sc.Tokens),
		"max_executions", o.MaxExecutions)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	slog.Info("draining: no new executions; running ones may finish", "within", o.DrainTimeout)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.DrainTimeout)
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
		return err
	}
	slog.Info("stopped")
	return nil
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
