package toolshape

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/toolshape/shapetest"
)

// FuzzSchema reads an upstream input schema as a catalogue does (ReadInput: the model and the
// validator), checks arguments against it, and renders what every reader makes of it (the
// stub, the redacted arguments, the approval view): no schema, however hostile, may crash the
// process, hang it, or make it fetch anything.
func FuzzSchema(f *testing.F) {
	for _, s := range shapetest.Schemas {
		for _, a := range shapetest.Args {
			f.Add(s, a)
		}
	}
	f.Fuzz(func(t *testing.T, schema, args string) {
		if len(schema) > MaxSchemaBytes {
			return
		}
		start := time.Now()
		in, _, _ := ReadInput([]byte(schema))
		if obj, _, err := ArgumentObject(json.RawMessage(args)); err == nil {
			_ = in.Check(obj)
		}
		_ = Stub(StubOf{Name: "s__fuzz", Alias: "s__fuzz", Input: in, Output: in.Schema()})
		_ = Redact(in.Schema(), json.RawMessage(args), 4000)
		_, _ = ApprovalView(in.Schema(), json.RawMessage(args), 4000)
		if el := time.Since(start); el > gate.Scaled(10*time.Second) {
			t.Fatalf("compiling and checking took %v", el)
		}
	})
}

// TestHostileSchemas runs every hostile schema against every hostile argument, as the fuzz
// target's seeds do, and pins what becomes of the cycles.
func TestHostileSchemas(t *testing.T) {
	for i, s := range shapetest.Schemas {
		in, unavailable, err := compile([]byte(s))
		if i < 11 && unavailable == "" {
			t.Errorf("schema %d (a cycle) was accepted (err %v): %s", i, err, s)
		}
		if in == nil {
			continue
		}
		for _, a := range shapetest.Args {
			obj, _, err := ArgumentObject(json.RawMessage(a))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_ = in.check(obj)
			if el := time.Since(start); el > gate.Scaled(10*time.Second) {
				t.Errorf("schema %d on %.40s: %v", i, a, el)
			}
		}
	}
}

// BenchmarkCheckBound measures validation at the edge of maxCheckCost for the shapes that
// cost the validator most per unit (many steps, failures whose errors quote the instance,
// regular expressions, enums, fan-out over nesting) and for an ordinary large argument:
// what one call can cost the host at most. Measured, not asserted.
func BenchmarkCheckBound(b *testing.B) {
	many := func(n int, s string) string {
		x := make([]string, n)
		for i := range x {
			x[i] = s
		}
		return strings.Join(x, ",")
	}
	for _, sh := range []struct {
		name, schema string
		args         func(n int) string
		max          int
	}{
		{"steps", `{"type":"object","properties":{"a":{"type":"array","items":{"allOf":[` + many(50, `{"type":"integer"}`) + `]}}}}`,
			func(n int) string { return `{"a":[` + many(n, "1") + `]}` }, 1 << 20},
		{"failures quoting the instance", `{"type":"object","properties":{"a":{"anyOf":[` + many(200, `{"type":"integer"}`) + `]}}}`,
			func(n int) string { return `{"a":"` + strings.Repeat("x", n) + `"}` }, 1 << 22},
		{"pattern", `{"type":"object","properties":{"a":{"type":"string","pattern":"(a|b|c|d|e|f|g|h)*[0-9]{20}z"}}}`,
			func(n int) string { return `{"a":"` + strings.Repeat("ab", n/2) + `"}` }, 1 << 22},
		{"enum", `{"type":"object","properties":{"a":{"type":"array","items":{"enum":[` + many(3000, `"somevalue-xxxxxxxxxxxx"`) + `]}}}}`,
			func(n int) string { return `{"a":[` + many(n, `"nope"`) + `]}` }, 1 << 20},
		{"fan-out over nesting", `{"type":"object","properties":{"a":{"$ref":"#"}},"allOf":[{"$ref":"#/$defs/p"},{"$ref":"#/$defs/p"}],"$defs":{"p":{"properties":{"a":{"$ref":"#"}}}}}`,
			func(n int) string {
				d := `{"n":1}`
				for range n {
					d = `{"a":` + d + `}`
				}
				return d
			}, 100},
		{"ordinary rows", `{"type":"object","properties":{"rows":{"type":"array","items":{"$ref":"#/$defs/Row"}}},"$defs":{"Row":{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string","maxLength":200},"kind":{"enum":["a","b","c","d"]},"tags":{"type":"array","items":{"type":"string"}}},"required":["id","name"]}}}`,
			func(n int) string {
				return `{"rows":[` + many(n, `{"id":1,"name":"some row name here","kind":"a","tags":["x","y","zzzz"]}`) + `]}`
			}, 1 << 20},
	} {
		b.Run(sh.name, func(b *testing.B) {
			in, _, err := compile([]byte(sh.schema))
			if in == nil {
				b.Fatal(err)
			}
			decode := func(n int) map[string]any {
				obj, _, err := ArgumentObject(json.RawMessage(sh.args(n)))
				if err != nil {
					b.Fatal(err)
				}
				return obj
			}
			lo, hi := 1, sh.max
			for lo < hi {
				mid := (lo + hi + 1) / 2
				if in.g.withinBounds(decode(mid)) {
					lo = mid
				} else {
					hi = mid - 1
				}
			}
			obj := decode(lo)
			b.ReportMetric(float64(len(sh.args(lo))), "arg-bytes")
			b.ResetTimer()
			for b.Loop() {
				_ = in.check(obj)
			}
		})
	}
}

// TestDraft07RefIgnoresSiblings: in draft-07 a $ref's sibling keywords are ignored, so a
// cycle through them is none: the tool stays available and validates through the $ref.
func TestDraft07RefIgnoresSiblings(t *testing.T) {
	in, unavailable, err := compile([]byte(`{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"n":{"type":"object","properties":{"a":{"type":"integer"}}}},"$ref":"#/definitions/n","allOf":[{"$ref":"#"}]}`))
	if in == nil || unavailable != "" || err != nil {
		t.Fatalf("unavailable %q, err %v", unavailable, err)
	}
	if err := in.check(map[string]any{"a": "x"}); err == nil {
		t.Errorf("the $ref's schema was not applied")
	}
	if err := in.check(map[string]any{"a": 1.0}); err != nil {
		t.Errorf("valid arguments refused: %v", err)
	}
}

func TestCompileSchemaDegrades(t *testing.T) {
	for _, c := range []struct {
		name, schema string
		valid, bad   string // "" skips
	}{
		{"2020-12", `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`, `{"a":"x"}`, `{"a":1}`},
		{"draft-07 no hash", `{"$schema":"http://json-schema.org/draft-07/schema","type":"object","properties":{"a":{"type":"integer"}}}`, `{"a":1}`, `{"a":"x"}`},
		{"draft-04", `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"a":{"type":"integer"}}}`, `{"a":1}`, `{"a":"x"}`},
		{"draft-04 boolean exclusiveMinimum", `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"a":{"type":"number","minimum":0,"exclusiveMinimum":true}}}`, `{"a":1}`, ""},
		{"unresolvable ref", `{"type":"object","properties":{"a":{"$ref":"https://example.invalid/x.json"}}}`, `{"a":1}`, ""},
	} {
		in, unavailable, _ := compile([]byte(c.schema))
		if unavailable != "" {
			t.Fatalf("%s: unavailable: %s", c.name, unavailable)
		}
		check := func(args string) error {
			if in == nil {
				return nil
			}
			obj, _, err := ArgumentObject(json.RawMessage(args))
			if err != nil {
				t.Fatal(err)
			}
			return in.check(obj)
		}
		if err := check(c.valid); err != nil {
			t.Errorf("%s: valid arguments refused: %v", c.name, err)
		}
		if c.bad != "" && check(c.bad) == nil {
			t.Errorf("%s: bad arguments accepted", c.name)
		}
	}
}
