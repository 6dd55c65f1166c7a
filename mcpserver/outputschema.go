package mcpserver

import (
	"encoding/json"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// runCodeOutputSchema is run_code's outputSchema: the result of one execution
// (docs/design.md §3.4), which is its structuredContent, refusals included. The keys every
// result carries are required; objects stay open (additionalProperties unset), so a key added
// to the result by docs/design.md §10's capabilities does not make a client refuse it. The
// failure kinds are failure.ResultKinds, so the schema moves with the code.
var runCodeOutputSchema = func() json.RawMessage {
	kinds := []string{}
	for _, k := range failure.ResultKinds() {
		kinds = append(kinds, string(k))
	}
	obj := func(props map[string]any, required ...string) map[string]any {
		o := map[string]any{"type": "object", "properties": props}
		if len(required) > 0 {
			o["required"] = required
		}
		return o
	}
	integer := map[string]any{"type": "integer", "minimum": 0}
	str := map[string]any{"type": "string"}
	usage := obj(map[string]any{"calls": integer, "transfer_bytes": integer, "produced_bytes": integer, "preserved_bytes": integer},
		"calls", "transfer_bytes", "produced_bytes", "preserved_bytes")
	ctxUsage := obj(map[string]any{"binding_bytes": integer, "returned_bytes": integer, "kept_out_bytes": integer},
		"binding_bytes", "returned_bytes", "kept_out_bytes")
	attachment := obj(map[string]any{
		"name": str, "handle": str, "content_type": str, "size": integer, "truncated": map[string]any{"type": "boolean"},
		"location": map[string]any{"enum": []string{"inline", "blob", "preview_only"}}, "reason": str, "text": str,
	}, "name", "content_type", "size", "truncated", "location")
	list := func(items any) map[string]any {
		return map[string]any{"type": []string{"array", "null"}, "items": items}
	}
	schema := obj(map[string]any{
		"value":       map[string]any{"description": "what the program's top level evaluated to (any JSON), or null"},
		"value_repr":  map[string]any{"type": "string", "description": "repr of a final value JSON cannot carry"},
		"stdout":      str,
		"stderr":      str,
		"stdout_size": integer,
		"stderr_size": integer,
		"failure": map[string]any{"oneOf": []any{map[string]any{"type": "null"}, obj(map[string]any{
			"kind": map[string]any{"enum": kinds}, "message": str, "traceback": str, "executed": map[string]any{"type": "boolean"},
		}, "kind", "message", "executed")}},
		"limit_hit":        map[string]any{"type": []string{"string", "null"}},
		"cancelled":        map[string]any{"type": "boolean"},
		"duration_seconds": map[string]any{"type": "number", "minimum": 0},
		"terms":            obj(map[string]any{"network": str, "isolation": str}),
		"isolation":        str,
		"guarantees": map[string]any{"type": "object",
			"additionalProperties": map[string]any{"enum": []string{"enforced", "unverified", "unavailable"}}},
		"network_denied":       map[string]any{"type": "boolean"},
		"attachments":          list(attachment),
		"artifacts":            list(attachment),
		"artifacts_omitted":    list(obj(map[string]any{"path": str, "reason": str}, "path", "reason")),
		"unavailable_bindings": list(str),
		"upstream_problems":    list(obj(map[string]any{"server": str, "problem": str}, "server", "problem")),
		"budget":               obj(map[string]any{"execution": usage, "run": usage}, "execution", "run"),
		"approvals": obj(map[string]any{"asked": integer, "accepted": integer, "declined": integer, "timed_out": integer, "unasked": integer},
			"asked", "accepted", "declined", "timed_out", "unasked"),
		"context": obj(map[string]any{"execution": ctxUsage, "run": ctxUsage}, "execution", "run"),
	}, "value", "stdout", "stderr", "stdout_size", "stderr_size", "failure", "limit_hit", "cancelled",
		"duration_seconds", "terms", "isolation", "guarantees", "network_denied", "budget", "approvals", "context")
	b, err := json.Marshal(schema)
	if err != nil {
		panic(err) // a literal above that cannot be encoded: a programming error
	}
	return b
}()
