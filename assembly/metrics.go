package assembly

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/mcpserver"
	"github.com/mcp-sandbox/mcp-sandbox/metrics"
)

// What an operator watches beside the logs and traces the command sets up: metrics on a
// listener of their own (README "Operating it").

// serveMetrics serves /metrics (and /healthz) on addr until stop. The listener is the
// operator's own: nothing there authenticates, so it belongs on loopback or a network only
// the scraper reaches; it never shares the MCP listener, where tenants' tokens are accepted.
func serveMetrics(addr string, m *metrics.Metrics) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("metrics listener failed", "err", err)
		}
	}()
	host, _, _ := net.SplitHostPort(addr)
	if !isLoopbackName(host) {
		slog.Warn("metrics are served without authentication beyond loopback: keep the address to a network only the scraper reaches", "addr", ln.Addr().String())
	}
	slog.Info("serving metrics", "addr", ln.Addr().String(), "url", "http://"+ln.Addr().String()+"/metrics")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			_ = srv.Close()
		}
		<-done
	}, nil
}

// metricsOf is the server's Metrics, or nil when it counts nothing.
func metricsOf(opts *mcpserver.Options) *metrics.Metrics {
	m, _ := opts.Metrics.(*metrics.Metrics)
	return m
}

// watchSandboxes registers the gauges read at scrape time: each profile's warm children and
// each tenant's upstream sessions.
func watchSandboxes(m *metrics.Metrics, ps *profileSet, pools *tenantPools) {
	if m == nil {
		return
	}
	for _, name := range sortedKeys(ps.runners) {
		if w, ok := ps.runners[name].(interface{ WarmIdle() int }); ok {
			m.WarmPool(name, w.WarmIdle)
		}
	}
	m.Upstreams(func() []metrics.UpstreamState {
		var out []metrics.UpstreamState
		for _, tname := range sortedKeys(pools.pools) {
			live := pools.pools[tname].Sessions()
			for _, up := range sortedKeys(live) {
				out = append(out, metrics.UpstreamState{Tenant: tname, Upstream: up, Connected: live[up]})
			}
		}
		return out
	})
}

// watchQuotas registers the gauges of what each tenant holds now (programs running and
// queued, sessions), read from the quotas at scrape time.
func watchQuotas(m *metrics.Metrics, q *mcpserver.Quotas, tenants []string) {
	if m == nil || q == nil {
		return
	}
	m.Quotas(func() []metrics.Load {
		seen := map[string]bool{}
		var out []metrics.Load
		for _, t := range slices.Concat(tenants, q.Tenants()) {
			if seen[t] {
				continue
			}
			seen[t] = true
			l := q.Load(t)
			out = append(out, metrics.Load{Tenant: t, Running: l.Running, Queued: l.Queued, Sessions: l.Sessions})
		}
		return out
	})
}
