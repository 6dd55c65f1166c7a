package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-sandbox/mcp-sandbox/assembly"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
	"github.com/mcp-sandbox/mcp-sandbox/mcpserver"
)

// TestTraceOfRunCode serves, in this process and with serve's own wiring, an agent whose
// tenant is granted the mock upstream, under the tracer provider serve installs (here with the
// SDK's in-memory exporter), and runs one program that makes two binding calls under a trace
// context the host sent in _meta. The spans form one tree under the host's span: run_code,
// two binding calls under it, an upstream call under each; and the mock upstream received in
// its own _meta the trace id and the upstream call's span as parent.
func TestTraceOfRunCode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(2*time.Minute))
	defer cancel()
	mock := testkit.MockUpstream(t)
	cfg, err := loadConfig(testkit.WriteConfig(t, fmt.Sprintf(`
data_dir: "-"
profiles:
  default: {backend: process, isolation: process, allow_same_uid: true}
upstreams:
  mock: {command: [%q]}
tenants:
  t:
    upstreams: [mock]
    agents:
      a: {code_execution: {profile: default}}
`, mock)))
	if err != nil {
		t.Fatal(err)
	}

	exp := tracetest.NewInMemoryExporter()
	tp := newTracerProvider(ctx, sdktrace.WithSyncer(exp))
	otel.SetTracerProvider(tp)
	defer tp.Shutdown(context.Background())

	oa, err := assembly.OpenAgent(ctx, cfg, "t", "a", assembly.Serving, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer oa.Close()
	a := oa.Agent
	st, ct := mcp.NewInMemoryTransports()
	ss, err := mcpserver.NewServer(a, &mcpserver.Options{}).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	const (
		hostTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
		hostSpan  = "00f067aa0ba902b7"
	)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_code",
		Meta: mcp.Meta{"traceparent": "00-" + hostTrace + "-" + hostSpan + "-01", "tracestate": "host=1"},
		Arguments: map[string]any{"code": `
first = await mock__meta()
second = await call_tool("mock__meta", {})
return [first, second]`}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res.Meta["mcp-sandbox/report"])
	var out struct {
		Value   []struct{ Traceparent, Tracestate string }
		Failure any
	}
	if err := json.Unmarshal(b, &out); err != nil || out.Failure != nil || len(out.Value) != 2 {
		t.Fatalf("run_code: %v %s", err, b)
	}

	spans := exp.GetSpans()
	byName := map[string][]tracetest.SpanStub{}
	for _, s := range spans {
		if s.SpanContext.TraceID().String() != hostTrace {
			t.Errorf("span %q is in trace %s, not the host's", s.Name, s.SpanContext.TraceID())
		}
		byName[s.Name] = append(byName[s.Name], s)
	}
	root := one(t, byName, "tools/call run_code")
	if root.Parent.SpanID().String() != hostSpan || !root.Parent.IsRemote() || root.SpanKind != trace.SpanKindServer {
		t.Errorf("run_code's span: parent %s (remote %v), kind %v; want the host's %s", root.Parent.SpanID(), root.Parent.IsRemote(), root.SpanKind, hostSpan)
	}
	if attr(root, "mcp_sandbox.outcome") != "completed" || attr(root, "mcp_sandbox.execution") == "" || attr(root, "mcp_sandbox.profile") != "default" {
		t.Errorf("run_code's span attributes: %v", root.Attributes)
	}
	calls := byName["binding mock__meta"]
	ups := byName["tools/call meta"]
	if len(calls) != 2 || len(ups) != 2 {
		t.Fatalf("spans: %d binding calls, %d upstream calls; want 2 of each (all: %v)", len(calls), len(ups), names(spans))
	}
	received := map[string]bool{}
	for _, v := range out.Value {
		received[v.Traceparent] = true
		if v.Tracestate != "host=1" {
			t.Errorf("the upstream received tracestate %q, want the host's", v.Tracestate)
		}
	}
	for i, c := range calls {
		if c.Parent.SpanID() != root.SpanContext.SpanID() || c.SpanKind != trace.SpanKindInternal || attr(c, "mcp_sandbox.upstream") != "mock" {
			t.Errorf("binding call %d: parent %s, kind %v, attributes %v; want under run_code %s", i, c.Parent.SpanID(), c.SpanKind, c.Attributes, root.SpanContext.SpanID())
		}
	}
	parents := map[trace.SpanID]bool{}
	for _, u := range ups {
		parents[u.Parent.SpanID()] = true
		if u.SpanKind != trace.SpanKindClient || attr(u, "gen_ai.tool.name") != "meta" {
			t.Errorf("upstream call: kind %v, attributes %v", u.SpanKind, u.Attributes)
		}
		want := "00-" + hostTrace + "-" + u.SpanContext.SpanID().String() + "-01"
		if !received[want] {
			t.Errorf("the mock upstream received %v; want %s, the upstream call's own span as parent", out.Value, want)
		}
	}
	if !parents[calls[0].SpanContext.SpanID()] || !parents[calls[1].SpanContext.SpanID()] {
		t.Errorf("each binding call is not the parent of one upstream call")
	}
}

func one(t *testing.T, byName map[string][]tracetest.SpanStub, name string) tracetest.SpanStub {
	t.Helper()
	if len(byName[name]) != 1 {
		t.Fatalf("%d spans named %q, want 1", len(byName[name]), name)
	}
	return byName[name][0]
}

func attr(s tracetest.SpanStub, key string) string {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value.String()
		}
	}
	return ""
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name+" <- "+s.Parent.SpanID().String())
	}
	return out
}
