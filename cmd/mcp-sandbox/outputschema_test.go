package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// TestRunCodeOutputSchema: run_code declares an outputSchema, and the structuredContent of
// every kind of result a client gets (a value, a value JSON cannot carry, a program error, a
// wall-clock timeout, a large stdout kept as an attachment, a refusal) validates against the
// schema as the client received it in tools/list.
func TestRunCodeOutputSchema(t *testing.T) {
	cfg := testkit.WriteConfig(t, testConfig)
	var schema *jsonschema.Resolved
	resolve := func(cs *mcp.ClientSession) {
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range res.Tools {
			if tl.Name != "run_code" {
				continue
			}
			b, _ := json.Marshal(tl.OutputSchema)
			var s jsonschema.Schema
			if err := json.Unmarshal(b, &s); err != nil {
				t.Fatalf("run_code's outputSchema %s: %v", b, err)
			}
			if s.Type != "object" {
				t.Errorf("outputSchema type %q, want object", s.Type)
			}
			if schema, err = s.Resolve(nil); err != nil {
				t.Fatalf("run_code's outputSchema does not resolve: %v", err)
			}
			return
		}
		t.Fatal("run_code is not listed")
	}
	check := func(cs *mcp.ClientSession, code, wantKind string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		res, r := runCode(t, ctx, cs, code, nil)
		kind := ""
		if r.Failure != nil {
			kind = r.Failure.Kind
		}
		if kind != wantKind {
			t.Errorf("%q: failure kind %q, want %q (%s)", code, kind, wantKind, testkit.Text(res))
		}
		b, _ := json.Marshal(res.StructuredContent)
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(v); err != nil {
			t.Errorf("%q: structuredContent does not validate against run_code's outputSchema: %v\n%s", code, err, b)
		}
	}
	wide := connectStdio(t, []string{"--config", cfg, "--agent", "wide"}, nil)
	resolve(wide)
	check(wide, "print('hi')\n{'a': [1, 2.5, None]}", "")
	check(wide, "{1, 2}", "")
	check(wide, "raise ValueError('boom')", "program_error")
	check(wide, "print('x' * 100)\n"+strings.Repeat("print('y' * 1000)\n", 300), "")
	check(wide, "import time\ntime.sleep(600)", "timeout")
	net := connectStdio(t, []string{"--config", cfg, "--agent", "net"}, nil)
	check(net, "1", "network_unavailable")
	// The schema is not vacuous: a failure without its message, a null value, a stream that is
	// not text, do not validate.
	for _, bad := range []string{
		`{"failure":{"kind":"program_error","executed":false}}`,
		`{"value":null,"stdout":"hi"}`,
		`{"stdout":5}`,
	} {
		var v any
		_ = json.Unmarshal([]byte(bad), &v)
		if schema.Validate(v) == nil {
			t.Errorf("validates, and should not: %s", bad)
		}
	}
}
