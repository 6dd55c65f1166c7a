package upstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-sandbox/mcp-sandbox/toolshape/shapetest"
)

// observedSchema is the JSON Schema o holds for tool, decoded for comparison.
func observedSchema(t *testing.T, o *observations, tool *Tool) (OutputType, any) {
	t.Helper()
	ot, raw := o.outputType(t.Context(), tool)
	if raw == nil {
		return ot, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("observed schema %s: %v", raw, err)
	}
	return ot, v
}

// TestObservedTypes: results of a tool without an output schema become its observed type after
// ObservedAfter of them, keys missing from some are optional, differing types are unions, and
// a result that no longer fits is reported as drift (and widens the type).
func TestObservedTypes(t *testing.T) {
	js := func(s string) any {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		name    string
		results []string
		schema  string // "" : no observed type
		drift   []string
	}{
		{"two are not enough", []string{`{"a":1}`, `{"a":2}`}, "", nil},
		{"optional keys and unions", []string{`{"id":"x","n":1,"tags":[]}`, `{"id":"y","n":2.5,"tags":["t"],"note":null}`, `{"id":"z","n":3,"tags":["u"],"note":"s"}`},
			`{"type":["object"],"properties":{"id":{"type":["string"]},"n":{"type":["number"]},"tags":{"type":["array"],"items":{"type":["string"]}},"note":{"type":["string","null"]}},"required":["id","n","tags"]}`, nil},
		{"records in a list", []string{`[{"sku":"A","qty":1},{"sku":"B"}]`, `[]`, `[{"sku":"C","qty":2,"gift":true}]`},
			`{"type":["array"],"items":{"type":["object"],"properties":{"sku":{"type":["string"]},"qty":{"type":["integer"]},"gift":{"type":["boolean"]}},"required":["sku"]}}`, nil},
		{"text", []string{`"one"`, `"two"`, `"three"`}, `{"type":["string"]}`, nil},
		{"drift after the type is known", []string{`{"total":1,"note":"a"}`, `{"total":2,"note":"b"}`, `{"total":3,"note":"c"}`, `{"total":"4.00","currency":"EUR"}`, `{"total":5,"note":"e"}`},
			`{"type":["object"],"properties":{"total":{"type":["string","integer"]},"note":{"type":["string"]},"currency":{"type":["string"]}},"required":["total"]}`,
			[]string{"result 4: result.note is missing, where every earlier result had it; result.total: str, where earlier results had int; result.currency is a new key"}},
		{"an int where floats were fits", []string{`{"x":1.5}`, `{"x":2.5}`, `{"x":3.5}`, `{"x":4}`}, `{"type":["object"],"properties":{"x":{"type":["number"]}},"required":["x"]}`, nil},
		{"a map", []string{`{"2024-01-01":{"n":1}}`, `{"` + strings.Repeat("k", 70) + `":{"n":2}}`, `{"2024-01-03":{"n":3}}`},
			`{"type":["object"],"additionalProperties":{"type":["object"],"properties":{"n":{"type":["integer"]}},"required":["n"]}}`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tool := stubTool(t, "s__tool", `{"type":"object"}`, "")
			var o observations
			for _, r := range c.results {
				o.observe(tool, []byte(r))
			}
			ot, got := observedSchema(t, &o, tool)
			if ot.Samples != len(c.results) {
				t.Errorf("samples %d, want %d", ot.Samples, len(c.results))
			}
			if c.schema == "" {
				if got != nil || ot.Source != OutputNone {
					t.Errorf("after %d results: %+v %v", len(c.results), ot, got)
				}
				return
			}
			if ot.Source != OutputObserved {
				t.Errorf("source %q", ot.Source)
			}
			if d := cmp.Diff(js(c.schema), got); d != "" {
				t.Errorf("schema (-want +got):\n%s", d)
			}
			want := c.drift
			if want == nil {
				want = []string{}
			}
			if d := cmp.Diff(want, ot.Drift); d != "" {
				t.Errorf("drift (-want +got):\n%s", d)
			}
		})
	}
}

// TestObservedStub: the observed type is the stub's return type, marked as observed with its
// sample count, and the stub still parses and passes mypy --strict; a declared output schema
// wins over anything seen.
func TestObservedStub(t *testing.T) {
	tool := stubTool(t, "s__order", `{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`, "")
	var o observations
	for _, r := range []string{`{"id":"a","total":1,"items":[{"sku":"A","qty":1}],"class":"x"}`,
		`{"id":"b","total":2,"items":[],"note":"n","class":"y"}`, `{"id":"c","total":3,"items":[{"sku":"B","qty":2}],"class":"z"}`} {
		o.observe(tool, []byte(r))
	}
	ot, raw := o.outputType(t.Context(), tool)
	stub := tool.pythonStubReturning(raw, ot)
	for _, w := range []string{"# the return type is observed, not declared: the shape of the 3 results seen\nasync def s__order(*, id: str) -> SOrderResult:",
		`SOrderResult = TypedDict("SOrderResult", {"id": str, "total": int, "items": list[SOrderResultItemsItem], "class": str, "note": NotRequired[str]})`,
		"class SOrderResultItemsItem(TypedDict):\n    sku: str\n    qty: int\n"} {
		if !strings.Contains(stub, w) {
			t.Errorf("stub lacks %q:\n%s", w, stub)
		}
	}
	o.observe(tool, []byte(`{"id":"d","total":"4","items":[],"class":"w"}`))
	ot, raw = o.outputType(t.Context(), tool)
	drifted := tool.pythonStubReturning(raw, ot)
	if !strings.Contains(drifted, `"total": int | str`) && !strings.Contains(drifted, `"total": str | int`) ||
		!strings.Contains(drifted, "4 results seen (it changed: get_tool_info's output_type.drift says how)") {
		t.Errorf("stub after drift:\n%s", drifted)
	}
	declared := stubTool(t, "s__typed", `{"type":"object"}`, `{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`)
	for range 5 {
		o.observe(declared, []byte(`{"ok":true,"extra":1}`))
	}
	if ot, raw := o.outputType(t.Context(), declared); ot.Source != OutputDeclared || ot.Samples != 0 || raw != nil {
		t.Errorf("a declared tool: %+v %s", ot, raw)
	}
	dir := t.TempDir()
	var files []string
	for i, s := range []string{stub, drifted} {
		f := filepath.Join(dir, fmt.Sprintf("observed_%d.pyi", i))
		if err := os.WriteFile(f, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	shapetest.CheckPython(t, files)
}

// TestObservedBounds: deep nesting is Any past the depth bound, a shape never passes its node
// bound however many distinct keys the results carry, only maxObserved tools are remembered
// (the least recently observed forgotten), and a result over observeMaxBytes is not read.
func TestObservedBounds(t *testing.T) {
	tool := stubTool(t, "s__deep", `{"type":"object"}`, "")
	var o observations
	deep := strings.Repeat(`{"a":`, 20) + "1" + strings.Repeat("}", 20)
	for range ObservedAfter {
		o.observe(tool, []byte(deep))
	}
	_, raw := o.outputType(t.Context(), tool)
	if n := bytes.Count(raw, []byte(`"properties"`)); n != shapeDepth {
		t.Errorf("%d levels of objects followed, want %d: %s", n, shapeDepth, raw)
	}

	wide := stubTool(t, "s__wide", `{"type":"object"}`, "")
	for i := range 40 {
		var keys []string
		for j := range 60 {
			keys = append(keys, fmt.Sprintf(`"k%d_%d":{"x%d":{"y":[1,{"z":%d}]}}`, i, j, j, j))
		}
		o.observe(wide, []byte("{"+strings.Join(keys, ",")+"}"))
		o.mu.Lock()
		size, nodes := o.tools[toolKey(wide)].shape.size, o.tools[toolKey(wide)].shape.resize().size
		o.mu.Unlock()
		if size != nodes || nodes > shapeNodes {
			t.Fatalf("after %d results: %d nodes (counted %d), over the bound %d", i+1, nodes, size, shapeNodes)
		}
	}
	wot, wraw := o.outputType(t.Context(), wide)
	stub := wide.pythonStubReturning(wraw, wot)
	if !strings.Contains(stub, "-> dict[str, ") {
		t.Errorf("a shape of many distinct keys is not a map:\n%.2000s", stub)
	}

	var many observations
	first := stubTool(t, "s__first", `{"type":"object"}`, "")
	many.observe(first, []byte(`1`))
	for i := range maxObserved + 10 {
		many.observe(stubTool(t, fmt.Sprintf("s__t%d", i), `{"type":"object"}`, ""), []byte(`1`))
	}
	if len(many.tools) != maxObserved {
		t.Errorf("%d tools remembered, want %d", len(many.tools), maxObserved)
	}
	if ot, _ := many.outputType(t.Context(), first); ot.Samples != 0 {
		t.Errorf("the least recently observed tool is remembered: %+v", ot)
	}

	big := stubTool(t, "s__big", `{"type":"object"}`, "")
	for range ObservedAfter {
		o.observe(big, []byte(`"`+strings.Repeat("x", observeMaxBytes)+`"`))
	}
	if ot, _ := o.outputType(t.Context(), big); ot.Samples != 0 {
		t.Errorf("a result over %d bytes was read: %+v", observeMaxBytes, ot)
	}
}

// TestObservedDefinitionChange: a tool whose definition changed starts afresh.
func TestObservedDefinitionChange(t *testing.T) {
	var o observations
	v1 := stubTool(t, "s__tool", `{"type":"object"}`, "")
	for range ObservedAfter {
		o.observe(v1, []byte(`{"a":1}`))
	}
	v2 := stubTool(t, "s__tool", `{"type":"object","properties":{"b":{"type":"string"}}}`, "")
	if ot, _ := o.outputType(t.Context(), v2); ot.Source != OutputNone || ot.Samples != 0 {
		t.Errorf("a changed definition keeps the old observations: %+v", ot)
	}
	if ot, _ := o.outputType(t.Context(), v1); ot.Source != OutputObserved {
		t.Errorf("the old definition lost its observations: %+v", ot)
	}
}

// TestObservedConcurrent: results observed and types read from many goroutines at once (as
// overlapping calls do) count every sample; run it with -race.
func TestObservedConcurrent(t *testing.T) {
	var o observations
	tool := stubTool(t, "s__tool", `{"type":"object"}`, "")
	done := make(chan struct{})
	for g := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 50 {
				o.observe(tool, []byte(fmt.Sprintf(`{"g%d":%d,"all":[%d]}`, g, i, i)))
				o.outputType(t.Context(), tool)
			}
		}()
	}
	for range 8 {
		<-done
	}
	if ot, _ := o.outputType(t.Context(), tool); ot.Samples != 400 || ot.Source != OutputObserved {
		t.Errorf("%+v, want 400 samples", ot)
	}
}
