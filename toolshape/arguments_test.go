package toolshape

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestArgumentObjectAgrees wants the same object, bytes and refusal from ArgumentObject as
// from the Decoder's way alone (decodeObject) for every object's arguments, including those
// each way would take apart: trailing values and brackets, bad JSON, repeated keys,
// invalid UTF-8, deep and large values.
func TestArgumentObjectAgrees(t *testing.T) {
	for _, args := range []string{
		``, ` `, `null`, ` null `, `{}`, ` {"a": 1, "b": [2, 3.5e2, null, true]} `,
		`{"a":1}{"b":2}`, `{"a":1} {`, `{"a":1}]`, `{"a":1}}`, `{"a":1} x`, `{"a":1},`,
		`{"a":1`, `{"a":}`, `{a:1}`, `[1]`, `"s"`, `1`, `{"a":1,"a":2}`, "{\"\xff\":\"\xfe\"}",
		`{"n":12345678901234567890123}`, `{"d":{"e":{"f":[[[{}]]]}}}`, "{\"t\":\"\\u2028<&>\"}\n",
	} {
		trimmed := bytes.TrimSpace([]byte(args))
		if len(trimmed) == 0 || trimmed[0] != '{' {
			continue // refused or taken as {} before either way
		}
		obj, raw, err := ArgumentObject(json.RawMessage(args))
		wobj, wraw, werr := decodeObject(trimmed)
		if d := cmp.Diff(wobj, obj); d != "" || string(raw) != string(wraw) || (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) {
			t.Errorf("%q: got %v %q %v, want %v %q %v", args, obj, raw, err, wobj, wraw, werr)
		}
	}
}
