package toolshape

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Input is a tool's input schema as this host uses it, read once when the tool is admitted
// (ReadInput): the model every reader shares (Schema), the keyword signature a binding takes,
// and the validator a call's arguments are checked by. Its methods take a nil Input for a
// tool without a schema: any keywords, nothing checked, nothing hidden by schema.
type Input struct {
	raw    json.RawMessage // the schema as read
	schema *Schema
	sig    Signature
	v      *validator // nil: arguments are not checked here, the upstream judges
}

// ReadInput reads b, a tool's input schema (JSON) as its server sent it, at most
// MaxSchemaBytes. Beside the Input it returns a reason, safe to show a model, why the tool
// must be unavailable (a schema nested too deep, or one that refers to itself without
// descending into the arguments), or an error saying why the schema does not check arguments
// (logged; the tool stays callable, and the upstream judges its arguments). The model and the
// signature are read either way.
func ReadInput(b []byte) (in *Input, unavailable string, err error) {
	s := ParseSchema(b)
	in = &Input{raw: b, schema: s, sig: newSignature(s)}
	in.v, unavailable, err = compile(b)
	return in, unavailable, err
}

// Schema is the input schema's model; nil when there is none, or it is not an object.
func (in *Input) Schema() *Schema {
	if in == nil {
		return nil
	}
	return in.schema
}

// ForHosts returns the schema as read, for a host's tools/list, and whether a host may be
// shown it at all: MCP admits a tool's input schema only of type "object".
func (in *Input) ForHosts() (json.RawMessage, bool) {
	if in == nil || !in.schema.isObjectType() {
		return nil, false
	}
	return in.raw, true
}

// Signature is the keyword set the tool's binding accepts.
func (in *Input) Signature() Signature {
	if in == nil {
		return OpenSignature()
	}
	return in.sig
}

// Check checks a call's decoded arguments against the schema, within the validator's bounds
// (validate.go). The error is a phrase safe to show a model that completes "arguments for
// <tool> ...".
func (in *Input) Check(args map[string]any) error {
	if in == nil || in.v == nil {
		return nil
	}
	if err := in.v.check(args); err != nil {
		if errors.Is(err, errCheckBound) {
			return fmt.Errorf("were not checked: %w", err)
		}
		return fmt.Errorf("do not match its input schema: %w", err)
	}
	return nil
}
