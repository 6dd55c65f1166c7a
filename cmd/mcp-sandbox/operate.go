package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/mcp-sandbox/mcp-sandbox/cmd/mcp-sandbox/internal/early"
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
