package toolshape

// Signature is the keyword set a binding accepts, read from the top level of the tool's input
// schema: what the program's binding checks before it sends a call, and what the host checks
// again before the upstream is reached (a program may not skip its own side).
type Signature struct {
	// Params are the schema's property names, in the order the server sent them.
	Params []string `json:"params"`
	// Required are the property names the schema requires.
	Required []string `json:"required"`
	// Open is true when keywords beyond Params are accepted: the schema declares no properties
	// and does not close the object, or it allows more (additionalProperties true or a schema,
	// patternProperties), or takes keys from subschemas (allOf, anyOf, $ref, ...).
	Open bool `json:"open,omitempty"`
}

// OpenSignature is the signature of a tool whose input schema is unknown: any keyword.
func OpenSignature() Signature {
	return Signature{Params: []string{}, Required: []string{}, Open: true}
}

// newSignature reads the keyword set from s, a tool's input schema (nil: not an object).
func newSignature(s *Schema) Signature {
	sig := Signature{Params: []string{}, Required: []string{}}
	if s == nil {
		sig.Open = true
		return sig
	}
	sig.Params = s.propertyNames()
	if s.requiredList {
		sig.Required = append(sig.Required, s.required...)
	}
	// Keys may come from a subschema (allOf, anyOf, a $ref, ...) or a pattern: they cannot be
	// listed from the top level, so none is refused here; the schema still judges them.
	sig.Open = s.hasAdditional && !s.closed || s.composed || !s.hasProperties && !s.hasAdditional
	return sig
}
