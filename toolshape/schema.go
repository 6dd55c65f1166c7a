package toolshape

import (
	"bytes"
	"encoding/json"
)

// Schema is a JSON Schema object as the readers of a tool's shape use it: its keyword
// signature (Signature), its Python stub (Stub), what redaction and the approval view hide
// (Redact, ApprovalView). It is read from JSON once, by ParseSchema, and is immutable after:
// no reader decodes the schema again. It keeps only those keywords, each read leniently (a
// keyword of another JSON type than the one it takes is as if absent), since an upstream's
// schema is untrusted and need not be valid for its tool to be callable: validation is the
// validator's (Input), which compiles the same bytes.
type Schema struct {
	types      []string // "type": one name, or a list
	objectType bool     // "type" is the name "object"
	properties []Property
	// propertiesObject is set when "properties" is an object; properties then lists its keys
	// in the order written, a key written twice twice (Property finds the last, as a JSON
	// decoder keeps it).
	propertiesObject bool
	hasProperties    bool     // "properties" is present, whatever its value
	required         []string // "required": its strings (an element that is not one reads as "")
	requiredList     bool     // "required" is a list of strings, or null
	items            *Schema  // "items", when it is one schema
	additional       *Schema  // "additionalProperties", when it is a schema
	hasAdditional    bool     // "additionalProperties" is present
	closed           bool     // "additionalProperties": false
	// composed is set when keys may come from elsewhere than "properties": patternProperties,
	// or a subschema applied in place (allOf, anyOf, $ref, ...).
	composed     bool
	enum         []json.RawMessage // "enum", when a list
	konst        json.RawMessage   // "const"; nil when absent
	alternatives []*Schema         // "anyOf", else "oneOf": a list of schemas (null ones nil)
	description  string
	writeOnly    bool   // "writeOnly": true
	format       string // "format", when a string
}

// Property is one entry of a schema's "properties": its name, and its schema (nil when the
// value is not a schema object, such as true).
type Property struct {
	Name   string
	Schema *Schema
}

// maxParseDepth bounds how deep ParseSchema follows subschemas; deeper ones read as nil (no
// schema: Any in a stub, nothing hidden). An input schema nests at most maxSchemaDepth JSON
// levels, so only an output schema can reach it.
const maxParseDepth = 64

// ParseSchema reads raw, a JSON Schema as JSON, into the model every reader shares. It
// returns nil when raw is not a JSON object (true, false, a list, not JSON): a schema that
// says nothing of keywords or types.
func ParseSchema(raw []byte) *Schema {
	if !json.Valid(raw) {
		return nil
	}
	return parseSchema(raw, 0)
}

// composers are the keywords that apply subschemas in place or add keys by pattern: a
// schema with one takes keys its "properties" do not list.
var composers = map[string]bool{"allOf": true, "anyOf": true, "oneOf": true, "$ref": true, "$dynamicRef": true,
	"if": true, "then": true, "else": true, "dependentSchemas": true, "dependencies": true,
	"unevaluatedProperties": true, "patternProperties": true}

func parseSchema(raw []byte, depth int) *Schema {
	if depth > maxParseDepth {
		return nil
	}
	entries, ok := objectEntries(raw)
	if !ok {
		return nil
	}
	last := make(map[string]json.RawMessage, len(entries))
	s := &Schema{}
	for _, e := range entries {
		last[e.key] = e.value
		s.composed = s.composed || composers[e.key]
	}
	if t, ok := last["type"]; ok {
		var one string
		if json.Unmarshal(t, &one) == nil {
			s.types, s.objectType = []string{one}, one == "object"
		} else {
			_ = json.Unmarshal(t, &s.types)
		}
	}
	if p, ok := last["properties"]; ok {
		s.hasProperties = true
		if props, ok := objectEntries(p); ok {
			s.propertiesObject = true
			s.properties = make([]Property, len(props))
			for i, e := range props {
				s.properties[i] = Property{Name: e.key, Schema: parseSchema(e.value, depth+1)}
			}
		}
	}
	if r, ok := last["required"]; ok {
		s.requiredList = json.Unmarshal(r, &s.required) == nil
	}
	s.items = parseSchema(last["items"], depth+1)
	if a, ok := last["additionalProperties"]; ok {
		s.hasAdditional = true
		s.closed = string(bytes.TrimSpace(a)) == "false"
		s.additional = parseSchema(a, depth+1)
	}
	if e, ok := last["enum"]; ok {
		_ = json.Unmarshal(e, &s.enum)
	}
	s.konst = last["const"]
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := schemaList(last[k], depth+1); ok && len(alts) > 0 {
			s.alternatives = alts
			break
		}
	}
	_ = json.Unmarshal(last["description"], &s.description)
	_ = json.Unmarshal(last["format"], &s.format)
	_ = json.Unmarshal(last["writeOnly"], &s.writeOnly)
	return s
}

// schemaList reads a list of schemas; ok is false unless every element is an object or null.
func schemaList(raw json.RawMessage, depth int) ([]*Schema, bool) {
	var elems []json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &elems) != nil || elems == nil {
		return nil, false
	}
	out := make([]*Schema, len(elems))
	for i, e := range elems {
		if bytes.Equal(bytes.TrimSpace(e), []byte("null")) {
			continue
		}
		if out[i] = parseSchema(e, depth); out[i] == nil {
			return nil, false
		}
	}
	return out, true
}

type entry struct {
	key   string
	value json.RawMessage
}

// objectEntries returns the members of the JSON object raw in the order written; ok is false
// when raw is not an object.
func objectEntries(raw []byte) (out []entry, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	out = []entry{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return out, true
		}
		k, _ := tok.(string)
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return out, true
		}
		out = append(out, entry{k, v})
	}
	return out, true
}

// Property returns the schema of the property named name (the last, when written twice), and
// whether "properties" lists it at all (whatever its value).
func (s *Schema) Property(name string) (*Schema, bool) {
	if s == nil {
		return nil, false
	}
	for i := len(s.properties) - 1; i >= 0; i-- {
		if s.properties[i].Name == name {
			return s.properties[i].Schema, true
		}
	}
	return nil, false
}

// propertyNames are the keys of "properties" in the order written; nil when it is absent or
// not an object.
func (s *Schema) propertyNames() []string {
	if s == nil || !s.propertiesObject {
		return nil
	}
	names := make([]string, len(s.properties))
	for i, p := range s.properties {
		names[i] = p.Name
	}
	return names
}

// secretProperty says why a property's value is hidden from a person, when its schema marks
// it a secret: writeOnly, or format "password". "" when it does not.
func (s *Schema) secretProperty() string {
	switch {
	case s == nil:
		return ""
	case s.writeOnly:
		return "writeOnly"
	case s.format == "password":
		return "password"
	}
	return ""
}

// itemSchema is the schema of an array's elements: "items" when it is one schema.
func (s *Schema) itemSchema() *Schema {
	if s == nil {
		return nil
	}
	return s.items
}

func (s *Schema) isObjectType() bool { return s != nil && s.objectType }
