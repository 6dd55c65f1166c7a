package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/mcp-sandbox/mcp-sandbox/cmd/mcp-sandbox/internal/early"
	"github.com/mcp-sandbox/mcp-sandbox/mcpserver"
	"github.com/mcp-sandbox/mcp-sandbox/metrics"
)

// What an operator watches (README "Operating it"): traces exported over OTLP when the
// standard environment names an endpoint, metrics on their own listener, logs on stderr in
// the format --log-format names (flags.go).

// tracingConfigured reports whether the environment asks for traces: an OTLP endpoint is named
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), and neither
// OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none turns them off.
func tracingConfigured(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(getenv("OTEL_TRACES_EXPORTER"), "none") {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// startTracing installs, when the environment asks for traces, a tracer provider that
// batches spans to the OTLP/HTTP endpoint it names (the exporter reads the standard
// OTEL_EXPORTER_OTLP_* variables itself: endpoint, headers, timeout, TLS). Otherwise the global
// provider stays OpenTelemetry's no-op and spans cost next to nothing. stop flushes what is
// batched, bounded, and uninstalls the provider.
func startTracing(ctx context.Context) (stop func(), err error) {
	if !tracingConfigured(os.Getenv) {
		return func() {}, nil
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		if p := os.Getenv(k); p != "" && p != "http/protobuf" {
			return nil, usagef("%s=%s: this build exports traces over OTLP http/protobuf only", k, p)
		}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("the OTLP trace exporter: %w", err)
	}
	tp := newTracerProvider(ctx, sdktrace.WithBatcher(exp))
	otel.SetTracerProvider(tp)
	slog.Info("exporting traces over OTLP/HTTP")
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			slog.Warn("traces not all exported at shutdown", "err", err)
		}
	}, nil
}

// newTracerProvider is the SDK's tracer provider for this server, spans going where opt says
// (a batcher in production, a test's syncer). The resource names the service (mcp-sandbox,
// unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say otherwise) and its version; the
// sampler is the SDK's default, the caller's decision when the host sent a trace context
// (OTEL_TRACES_SAMPLER may change it).
func newTracerProvider(ctx context.Context, opt sdktrace.TracerProviderOption) *sdktrace.TracerProvider {
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "mcp-sandbox"), attribute.String("service.version", early.Version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost())
	if err != nil {
		slog.Warn("trace resource incomplete", "err", err)
	}
	return sdktrace.NewTracerProvider(opt, sdktrace.WithResource(res))
}

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
