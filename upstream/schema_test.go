package upstream

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// hostileSchemas are input schemas an upstream may send to crash or hang the process: cycles,
// fan-out, deep nesting, huge enums, pathological patterns, remote references, and shapes
// the schema library may not expect.
var hostileSchemas = []string{
	`{"$ref":"#"}`,
	`{"allOf":[{"$ref":"#"}]}`,
	`{"type":"object","properties":{"a":{"$ref":"#/$defs/x"}},"$defs":{"x":{"$ref":"#/$defs/y"},"y":{"$ref":"#/$defs/x"}}}`,
	`{"$defs":{"x":{"not":{"$ref":"#/$defs/x"}}},"$ref":"#/$defs/x"}`,
	`{"$defs":{"x":{"if":{"$ref":"#/$defs/y"}},"y":{"then":{"$ref":"#/$defs/x"}}},"anyOf":[{"$ref":"#/$defs/x"}]}`,
	`{"$id":"http://a.example/root","$defs":{"x":{"$id":"http://b.example/x","$ref":"http://a.example/root"}},"allOf":[{"$ref":"http://b.example/x"}]}`,
	`{"$dynamicAnchor":"m","anyOf":[{"$dynamicRef":"#m"}]}`,
	`{"$anchor":"top","oneOf":[{"$ref":"#top"}]}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"a":{"$id":"#a","allOf":[{"$ref":"#a"}]}},"$ref":"#/definitions/a"}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","dependencies":{"a":{"$ref":"#"}}}`,
	`{"dependentSchemas":{"a":{"$ref":"#"}}}`,
	`{"type":"object","properties":{"a":{"$ref":"#"}},"allOf":[{"$ref":"#/$defs/p"},{"$ref":"#/$defs/p"}],"$defs":{"p":{"properties":{"a":{"$ref":"#"}}}}}`,
	fanOut(60),
	`{"properties":{"a":{"$ref":"https://schemas.example/x.json"}}}`,
	`{"$ref":"file:///etc/passwd"}`,
	`{"$ref":"#/properties/a/items/0/not"}`,
	`{"$ref":"#/$defs/%ZZ"}`,
	`{"$ref":"#/items/-"}`,
	`{"$id":"relative","$ref":"#"}`,
	`{"type":"string","pattern":"(a*)*(b+)+(c|cc|ccc)*$"}`,
	`{"type":"string","pattern":"` + strings.Repeat(`(x|y)`, 200) + `"}`,
	`{"patternProperties":{"` + strings.Repeat(`[a-z]{1,100}`, 8) + `":{"type":"integer"}}}`,
	`{"type":"array","items":{"enum":[` + strings.TrimSuffix(strings.Repeat(`"aaaaaaaaaaaaaaaaaaaaaaaa",`, 2000), ",") + `]}}`,
	`{"type":"array","uniqueItems":true,"contains":{"const":{"a":[1,2,3]}},"minContains":2}`,
	`{"unevaluatedProperties":{"$ref":"#"},"unevaluatedItems":{"$ref":"#"},"propertyNames":{"$ref":"#/$defs/n"},"$defs":{"n":{"type":"string","maxLength":3}}}`,
	strings.Repeat(`{"not":`, 70) + `{}` + strings.Repeat(`}`, 70),
	strings.Repeat(`{"items":`, 60) + `{"type":"integer"}` + strings.Repeat(`}`, 60),
	`{"type":["object","array"],"minProperties":-1,"maxItems":1e300,"multipleOf":0}`,
	`true`, `false`, `[]`, `"string"`, `null`, `{"$schema":"http://json-schema.org/draft-04/schema#","exclusiveMinimum":true,"minimum":1}`,
}

var hostileArgs = []string{
	`{}`, `{"a":1}`, `{"a":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab"}`, `{"a":[1,2,3,[1,2,3],{"a":[1,2,3]}]}`,
	`{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"n":1}}}}}}}}}}}}}}}}}}}}}`,
	`{"a":` + strings.Repeat("[", 500) + strings.Repeat("]", 500) + `}`,
	`{"a":[` + strings.TrimSuffix(strings.Repeat(`"x",`, 5000), ",") + `]}`,
}

// FuzzSchema compiles an upstream input schema and checks arguments against it: no schema,
// however hostile, may crash the process, hang it, or make it fetch anything.
func FuzzSchema(f *testing.F) {
	for _, s := range hostileSchemas {
		for _, a := range hostileArgs {
			f.Add(s, a)
		}
	}
	f.Fuzz(func(t *testing.T, schema, args string) {
		if len(schema) > maxSchemaBytes {
			return
		}
		start := time.Now()
		in, _, _ := compileInput([]byte(schema))
		if in != nil {
			if obj, _, err := argumentObject(json.RawMessage(args)); err == nil {
				_ = in.check(obj)
			}
		}
		if el := time.Since(start); el > gate.Scaled(10*time.Second) {
			t.Fatalf("compiling and checking took %v", el)
		}
	})
}

// TestHostileSchemas runs every hostile schema against every hostile argument, as the fuzz
// target's seeds do, and pins what becomes of the cycles.
func TestHostileSchemas(t *testing.T) {
	for i, s := range hostileSchemas {
		in, unavailable, err := compileInput([]byte(s))
		if i < 11 && unavailable == "" {
			t.Errorf("schema %d (a cycle) was accepted (err %v): %s", i, err, s)
		}
		if in == nil {
			continue
		}
		for _, a := range hostileArgs {
			obj, _, err := argumentObject(json.RawMessage(a))
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
			in, _, err := compileInput([]byte(sh.schema))
			if in == nil {
				b.Fatal(err)
			}
			decode := func(n int) map[string]any {
				obj, _, err := argumentObject(json.RawMessage(sh.args(n)))
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
	in, unavailable, err := compileInput([]byte(`{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"n":{"type":"object","properties":{"a":{"type":"integer"}}}},"$ref":"#/definitions/n","allOf":[{"$ref":"#"}]}`))
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
