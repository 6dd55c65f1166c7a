package mcpserver

import (
	"encoding/json"
	"sync"
)

// runCodeOutputSchema is run_code's outputSchema: the result of one execution
// (docs/design.md §3.4), which is its structuredContent, refusals included. It is listed with
// run_code, so every byte of it is context a host spends in every session: it types the keys
// a model reads to use a result (the value, the streams and their sizes, the failure and its
// keys, the limit hit, the attachments and artifacts that carry handles), requires the keys
// every result carries, and leaves the rest open: the envelope's objects (terms, guarantees,
// budget, approvals, context) are required by name only, and the keys only some results carry
// (network, start, resumed, the problems' lists) are not named, so a key added to the result
// later does not make a client refuse it. Built on first use: every start of this binary, the
// init helper's included, runs package initialisers.
var runCodeOutputSchema = sync.OnceValue(func() json.RawMessage {
	typ := func(t ...string) map[string]any {
		if len(t) == 1 {
			return map[string]any{"type": t[0]}
		}
		return map[string]any{"type": t}
	}
	str, integer, boolean, list := typ("string"), typ("integer"), typ("boolean"), typ("array", "null")
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"value": map[string]any{}, "value_repr": str,
			"stdout": str, "stderr": str, "stdout_size": integer, "stderr_size": integer,
			"failure": map[string]any{"type": []string{"object", "null"},
				"properties": map[string]any{"kind": str, "message": str, "traceback": str, "executed": boolean},
				"required":   []string{"kind", "message", "executed"}},
			"limit_hit": typ("string", "null"), "cancelled": boolean, "duration_seconds": typ("number"),
			"isolation": str, "attachments": list, "artifacts": list,
		},
		"required": []string{"value", "stdout", "stderr", "failure", "limit_hit", "cancelled",
			"duration_seconds", "terms", "isolation", "guarantees", "budget", "approvals", "context"},
	}
	b, err := json.Marshal(schema)
	if err != nil {
		panic(err) // a literal above that cannot be encoded: a programming error
	}
	return b
})
