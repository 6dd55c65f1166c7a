package toolshape

import (
	"bytes"
	"encoding/json"
	"errors"
)

// ArgumentObject decodes args as a JSON object, the form every tool takes (empty or null is
// {}), and returns it beside the bytes to send, as sent. Numbers decode as float64, for
// validation only: the upstream gets the bytes.
func ArgumentObject(args json.RawMessage) (map[string]any, json.RawMessage, error) {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return map[string]any{}, json.RawMessage("{}"), nil
	}
	if trimmed[0] != '{' {
		return nil, nil, errors.New("arguments must be a JSON object")
	}
	// One JSON object and nothing after it, the usual case, in one Unmarshal: it decodes the
	// same map the Decoder would, without the Decoder's buffer (docs/design.md §19.9). Anything
	// else takes the Decoder's way, so a refusal reads as it did.
	var obj map[string]any
	if json.Unmarshal(trimmed, &obj) == nil && obj != nil {
		return obj, json.RawMessage(trimmed), nil
	}
	return decodeObject(trimmed)
}

// decodeObject decodes trimmed, which starts with '{', through a json.Decoder, which tells a
// second value after the object apart from bad JSON.
func decodeObject(trimmed []byte) (map[string]any, json.RawMessage, error) {
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
