// Package telemetry is the seam between the server and what an operator watches: the metrics
// the server counts (Metrics, reported through a Reporter bound to one agent), the spans of a
// trace (Start, with the W3C trace context taken from and given to an MCP request's _meta),
// and the logger of one execution carried in a context (WithLogger, Logger).
//
// It imports the OpenTelemetry API (go.opentelemetry.io/otel and its trace, attribute, codes
// and propagation packages) and the standard library, never the OpenTelemetry SDK, Prometheus
// or another package of this module: mcpserver, binding and upstream report into it, package
// metrics implements Metrics over Prometheus, and cmd installs the SDK's tracer provider
// when an OTLP endpoint is configured.
//
// # Decisions
//
//   - Spans go to the global tracer provider (otel.GetTracerProvider), OpenTelemetry's own
//     seam between libraries and the program that configures them. Until cmd installs one,
//     it is a no-op: a span costs an allocation or two and records nothing, and a trace
//     context a host sent still passes on to the upstreams unchanged.
//   - The trace context travels in _meta under "traceparent" and "tracestate" (W3C Trace
//     Context, the keys the MCP revision of 2026-07-28 reserves, SEP-414). "baggage" is
//     neither taken nor passed on: it is the host's free-form data, and an upstream belongs
//     to someone else.
//   - Span names are bounded by construction: "tools/call <tool>" only for a name the server
//     offers or the catalogue holds, never a name a program or host made up.
//   - Metrics labels never carry program text, arguments, values or secrets: upstreams are
//     named only when configured (else "_unknown"; built-ins are "_builtin"), outcomes are
//     failure kinds. Tenant and agent reach Metrics in a Scope; whether they become labels is
//     the implementation's choice (package metrics: only when the operator turns it on).
//
// # Concurrency
//
// Everything here is safe for concurrent use; a Reporter and a Span are values that may be
// copied. Implementations of Metrics must be safe for concurrent use.
package telemetry
