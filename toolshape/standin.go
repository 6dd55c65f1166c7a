package toolshape

import (
	"encoding/json"
	"slices"
)

// StandIn is the value a rehearsal hands a program in place of a call's result
// (docs/design.md §22): shaped by s, the tool's output schema (declared, or observed of its
// results), so the program can go on: an object with every property s declares, a list
// empty, a string "", a number 0, a boolean false, a const or the first enum value as given;
// null when s says nothing (nil) or allows null.
func StandIn(s *Schema) json.RawMessage {
	b, err := json.Marshal(standIn(s, 0))
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

// maxStandInDepth bounds how deep a stand-in is built; deeper values are null.
const maxStandInDepth = 16

func standIn(s *Schema, depth int) any {
	switch {
	case s == nil || depth > maxStandInDepth:
		return nil
	case s.konst != nil:
		return s.konst
	case len(s.enum) > 0:
		return s.enum[0]
	case len(s.types) == 0 && len(s.alternatives) > 0:
		return standIn(s.alternatives[0], depth+1)
	}
	t := ""
	if len(s.types) > 0 {
		t = s.types[0]
	}
	if len(s.types) == 0 && s.hasProperties {
		t = "object"
	}
	if slices.Contains(s.types, "null") {
		return nil
	}
	switch t {
	case "object":
		obj := map[string]any{}
		for _, p := range s.properties {
			obj[p.Name] = standIn(p.Schema, depth+1)
		}
		return obj
	case "array":
		return []any{}
	case "string":
		return ""
	case "integer", "number":
		return 0
	case "boolean":
		return false
	}
	return nil
}
