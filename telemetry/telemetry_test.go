package telemetry

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// A trace context in _meta passes through unchanged when no tracer provider is installed (the
// no-op default): the upstream sees the host's trace, and baggage never travels.
func TestMetaPassesThroughWithoutATracer(t *testing.T) {
	ctx := FromMeta(context.Background(), map[string]any{"traceparent": parent, "tracestate": "a=1", "baggage": "user=secret"})
	ctx, span := Start(ctx, "x", Server)
	defer span.End("")
	out := ToMeta(ctx)
	if out["traceparent"] != parent || out["tracestate"] != "a=1" || out["baggage"] != nil || len(out) != 2 {
		t.Errorf("ToMeta = %v", out)
	}
	h := http.Header{}
	ToHeader(ctx, h)
	if h.Get("traceparent") != parent || h.Get("baggage") != "" {
		t.Errorf("ToHeader = %v", h)
	}
}

func TestMalformedOrAbsentMeta(t *testing.T) {
	for _, meta := range []map[string]any{nil, {}, {"traceparent": 7}, {"traceparent": "00-zz-yy-01"},
		{"traceparent": "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}, {"tracestate": "a=1"}} {
		ctx := FromMeta(context.Background(), meta)
		if trace.SpanContextFromContext(ctx).IsValid() || ToMeta(ctx) != nil {
			t.Errorf("meta %v gave a trace context", meta)
		}
		h := http.Header{}
		ToHeader(ctx, h)
		if len(h) != 0 {
			t.Errorf("meta %v gave headers %v", meta, h)
		}
	}
}

func TestZeroValuesDoNothing(t *testing.T) {
	var s Span
	s.Set(String("k", "v"))
	s.End("boom")
	var r Reporter
	r.Execution(Execution{})
	r.Call(Call{})
	r.BudgetRefusal("max_calls", "run")
	r.Approval("accepted")
	r.Kept("output", 1)
	if For(nil, "t", "a") != (Reporter{s: Scope{Tenant: "t", Agent: "a"}}) {
		t.Error("For(nil) reports somewhere")
	}
}

type recorder struct{ got []string }

func (r *recorder) Execution(s Scope, e Execution) {
	r.got = append(r.got, s.Tenant+"/"+s.Agent+" exec "+e.Outcome)
}
func (r *recorder) Call(s Scope, c Call) {
	r.got = append(r.got, s.Tenant+"/"+s.Agent+" call "+c.Upstream)
}
func (r *recorder) BudgetRefusal(s Scope, m, h string) { r.got = append(r.got, "refusal "+m+" "+h) }
func (r *recorder) Approval(s Scope, d string)         { r.got = append(r.got, "approval "+d) }
func (r *recorder) Kept(s Scope, src string, n int64)  { r.got = append(r.got, "kept "+src) }

func TestReporterBindsTheScope(t *testing.T) {
	m := &recorder{}
	r := For(m, "acme", "analyst")
	r.Execution(Execution{Outcome: "completed"})
	r.Call(Call{Upstream: "docs"})
	r.BudgetRefusal("max_calls", "execution")
	r.Approval("unasked")
	r.Kept("binding", 3)
	want := "acme/analyst exec completed|acme/analyst call docs|refusal max_calls execution|approval unasked|kept binding"
	if got := strings.Join(m.got, "|"); got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

func TestLoggerInContext(t *testing.T) {
	fallback := slog.Default()
	if Logger(context.Background(), fallback) != fallback {
		t.Error("no logger in the context, and not the fallback")
	}
	var b strings.Builder
	l := slog.New(slog.NewTextHandler(&b, nil)).With("execution", "x_1")
	Logger(WithLogger(context.Background(), l), fallback).Info("hello")
	if !strings.Contains(b.String(), "execution=x_1") {
		t.Errorf("logged %q", b.String())
	}
}
