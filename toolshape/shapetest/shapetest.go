package shapetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// Schemas are input schemas an upstream may send to crash or hang the process: cycles,
// fan-out, deep nesting, huge enums, pathological patterns, remote references, and shapes
// the schema library may not expect.
var Schemas = []string{
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
	FanOut(60),
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

// Args are arguments to check against each of Schemas: deep, wide, long.
var Args = []string{
	`{}`, `{"a":1}`, `{"a":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab"}`, `{"a":[1,2,3,[1,2,3],{"a":[1,2,3]}]}`,
	`{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"n":1}}}}}}}}}}}}}}}}}}}}}`,
	`{"a":` + strings.Repeat("[", 500) + strings.Repeat("]", 500) + `}`,
	`{"a":[` + strings.TrimSuffix(strings.Repeat(`"x",`, 5000), ",") + `]}`,
}

// FanOut is a schema whose validation work doubles at each of depth $defs, without any
// cycle: d0 is a string, d(i+1) is anyOf [d(i), d(i)].
func FanOut(depth int) string {
	defs := []string{`"d0":{"type":"string","pattern":"^a+$"}`}
	for i := 1; i <= depth; i++ {
		defs = append(defs, fmt.Sprintf(`"d%d":{"anyOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i-1, i-1))
	}
	return fmt.Sprintf(`{"type":"object","properties":{"a":{"$ref":"#/$defs/d%d"}},"$defs":{%s}}`, depth, strings.Join(defs, ","))
}

// CheckPython parses each file with Python's ast and type-checks them all with mypy --strict.
func CheckPython(t *testing.T, files []string) {
	t.Helper()
	py, err := exec.LookPath("python3")
	gate.Require(t, "python", err == nil, "python3 is not on PATH")
	for _, f := range files {
		if out, err := exec.Command(py, "-c", "import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])", f).CombinedOutput(); err != nil {
			b, _ := os.ReadFile(f)
			t.Errorf("ast.parse %s: %v\n%s\n%s", f, err, out, b)
		}
	}
	mypy, err := exec.LookPath("mypy")
	gate.Require(t, "mypy", err == nil, "mypy is not on PATH (apt-get install mypy)")
	args := append([]string{"--strict", "--no-incremental", "--cache-dir", filepath.Join(t.TempDir(), "cache")}, files...)
	if out, err := exec.Command(mypy, args...).CombinedOutput(); err != nil {
		t.Errorf("mypy --strict: %v\n%s", err, out)
	}
}
