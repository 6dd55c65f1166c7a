package toolshape

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// argumentObjectByDecoder is ArgumentObject as it was before its one-Unmarshal way
// (docs/design.md §19.9): every argument goes through json.Decoder.
func argumentObjectByDecoder(args json.RawMessage) (map[string]any, json.RawMessage, error) {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return map[string]any{}, json.RawMessage("{}"), nil
	}
	if trimmed[0] != '{' {
		return nil, nil, errors.New("arguments must be a JSON object")
	}
	var obj map[string]any
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(&obj); err != nil {
		return nil, nil, errors.New("arguments are not valid JSON")
	}
	if dec.More() {
		return nil, nil, errors.New("arguments hold more than one JSON value")
	}
	return obj, json.RawMessage(trimmed), nil
}

// TestArgumentObjectAgrees wants the same object, bytes and refusal as the Decoder's way for
// arguments each way would take apart: trailing values and brackets, bad JSON, repeated keys,
// invalid UTF-8, deep and large values.
func TestArgumentObjectAgrees(t *testing.T) {
	for _, args := range []string{
		``, ` `, `null`, ` null `, `{}`, ` {"a": 1, "b": [2, 3.5e2, null, true]} `,
		`{"a":1}{"b":2}`, `{"a":1} {`, `{"a":1}]`, `{"a":1}}`, `{"a":1} x`, `{"a":1},`,
		`{"a":1`, `{"a":}`, `{a:1}`, `[1]`, `"s"`, `1`, `{"a":1,"a":2}`, "{\"\xff\":\"\xfe\"}",
		`{"n":12345678901234567890123}`, `{"d":{"e":{"f":[[[{}]]]}}}`, "{\"t\":\"\\u2028<&>\"}\n",
	} {
		obj, raw, err := ArgumentObject(json.RawMessage(args))
		wobj, wraw, werr := argumentObjectByDecoder(json.RawMessage(args))
		if d := cmp.Diff(wobj, obj); d != "" || string(raw) != string(wraw) || (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) {
			t.Errorf("%q: got %v %q %v, want %v %q %v", args, obj, raw, err, wobj, wraw, werr)
		}
	}
}
