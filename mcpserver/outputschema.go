package mcpserver

import (
	"encoding/json"
	"sync"
)

// runCodeOutputSchema is run_code's outputSchema: what a model reads of one execution
// (ModelResult, docs/design.md §14.1), which is its structuredContent, refusals included.
// Every key of it is left out when it has nothing to say, so the schema requires none and
// types each with one type (no nullable type lists, which some clients cannot map); the value
// is any JSON but null, each type a branch of anyOf. It names the keys a model reads to use a
// result and leaves the rare ones (limit, budget_left, approvals, network, ...) to the open
// object, so a key added later does not make a client refuse a result either. It is listed
// with run_code, so it stays small (the listing is held under 4 KiB).
// Built on first use: every start of this binary, the init helper's included, runs package
// initialisers.
var runCodeOutputSchema = sync.OnceValue(func() json.RawMessage {
	typ := func(t string) map[string]any { return map[string]any{"type": t} }
	str, boolean, list, object := typ("string"), typ("boolean"), typ("array"), typ("object")
	var anyValue []any
	for _, t := range []string{"object", "array", "string", "number", "boolean"} {
		anyValue = append(anyValue, typ(t))
	}
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"value": map[string]any{"anyOf": anyValue}, "value_preview": str, "value_repr": str, "value_type": str,
			"stdout": str, "stderr": str,
			"failure": map[string]any{"type": "object",
				"properties": map[string]any{"kind": str, "message": str, "traceback": str, "executed": boolean},
				"required":   []string{"kind", "message", "executed"}},
			"limit_hit": str, "attachments": list, "artifacts": list, "isolation": str, "isolation_fallback": str, "guarantees": object,
		},
	}
	b, err := json.Marshal(schema)
	if err != nil {
		panic(err) // a literal above that cannot be encoded: a programming error
	}
	return b
})
