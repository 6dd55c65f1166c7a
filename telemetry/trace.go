package telemetry

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Instrumentation names this module's tracer.
const Instrumentation = "github.com/mcp-sandbox/mcp-sandbox"

// SpanKind says which side of a call a span is.
type SpanKind int

// The kinds this module starts.
const (
	Internal SpanKind = iota // a step inside the server (a binding call)
	Server                   // a request the server answers (tools/call from a host)
	Client                   // a request the server makes (tools/call to an upstream)
)

var kinds = map[SpanKind]trace.SpanKind{Internal: trace.SpanKindInternal, Server: trace.SpanKindServer, Client: trace.SpanKindClient}

// Attr is one attribute of a span.
type Attr = attribute.KeyValue

// String, Int and Bool make attributes.
func String(k, v string) Attr    { return attribute.String(k, v) }
func Int(k string, v int64) Attr { return attribute.Int64(k, v) }
func Bool(k string, v bool) Attr { return attribute.Bool(k, v) }

// Span is one traced operation. The zero Span does nothing.
type Span struct{ s trace.Span }

// Start starts a span under ctx's span (or as a root) on the global tracer provider.
func Start(ctx context.Context, name string, kind SpanKind, attrs ...Attr) (context.Context, Span) {
	ctx, s := otel.GetTracerProvider().Tracer(Instrumentation).Start(ctx, name,
		trace.WithSpanKind(kinds[kind]), trace.WithAttributes(attrs...))
	return ctx, Span{s}
}

// Current is ctx's span, so a handler can annotate the span its caller started.
func Current(ctx context.Context) Span { return Span{trace.SpanFromContext(ctx)} }

// Set adds attributes.
func (s Span) Set(attrs ...Attr) {
	if s.s != nil && s.s.IsRecording() {
		s.s.SetAttributes(attrs...)
	}
}

// End ends the span: kind "" is success; any other is the failure kind, recorded as the
// span's error status and as error.type.
func (s Span) End(kind string) {
	if s.s == nil {
		return
	}
	if kind != "" && s.s.IsRecording() {
		s.s.SetAttributes(attribute.String("error.type", kind))
		s.s.SetStatus(codes.Error, kind)
	}
	s.s.End()
}

// The _meta keys of W3C Trace Context (SEP-414).
const (
	MetaTraceparent = "traceparent"
	MetaTracestate  = "tracestate"
)

var traceContext = propagation.TraceContext{}

// metaCarrier reads and writes the trace context's keys of an MCP _meta object.
type metaCarrier map[string]any

func (m metaCarrier) Get(key string) string {
	if key != MetaTraceparent && key != MetaTracestate {
		return ""
	}
	s, _ := m[key].(string)
	return s
}

func (m metaCarrier) Set(key, value string) { m[key] = value }

func (m metaCarrier) Keys() []string { return []string{MetaTraceparent, MetaTracestate} }

// FromMeta returns ctx carrying the remote span context of a request's _meta (traceparent,
// tracestate), or ctx itself when there is none or it is malformed.
func FromMeta(ctx context.Context, meta map[string]any) context.Context {
	if _, ok := meta[MetaTraceparent].(string); !ok {
		return ctx
	}
	return traceContext.Extract(ctx, metaCarrier(meta))
}

// ToMeta returns the _meta entries that pass ctx's span context on (traceparent, and
// tracestate when there is one), or nil when ctx has no valid span context.
func ToMeta(ctx context.Context) map[string]any {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	m := metaCarrier{}
	traceContext.Inject(ctx, m)
	return m
}

// ToHeader sets the W3C Trace Context headers (traceparent, tracestate) that pass ctx's span
// context on to an HTTP peer that is not an MCP server (an A2A agent); it sets nothing when
// ctx has no valid span context.
func ToHeader(ctx context.Context, h http.Header) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		traceContext.Inject(ctx, propagation.HeaderCarrier(h))
	}
}
