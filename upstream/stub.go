package upstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/nearest"
)

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

// Signature returns the keyword set the tool's binding accepts.
func (t *Tool) Signature() Signature {
	if t.sig == nil {
		return Signature{Params: []string{}, Required: []string{}, Open: true}
	}
	return *t.sig
}

// Signatures maps each of Names to the keywords its binding takes.
func (t *Turn) Signatures() map[string]Signature {
	out := map[string]Signature{}
	for _, n := range t.Names() {
		out[n] = t.bound[n].Signature()
	}
	return out
}

// newSignature reads the keyword set from raw, a tool's input schema as JSON.
func newSignature(raw []byte) *Signature {
	sig := &Signature{Params: []string{}, Required: []string{}}
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		sig.Open = true
		return sig
	}
	props, hasProps := top["properties"]
	sig.Params = objectKeys(props)
	var req []string
	if json.Unmarshal(top["required"], &req) == nil {
		sig.Required = append(sig.Required, req...)
	}
	addl, hasAddl := top["additionalProperties"]
	addl = bytes.TrimSpace(addl)
	switch {
	case hasAddl && string(addl) != "false":
		sig.Open = true
	case top["patternProperties"] != nil:
		sig.Open = true
	case composed(top):
		// Keys may come from a subschema (allOf, anyOf, a $ref, ...): they cannot be listed
		// from the top level, so none is refused here; the schema still judges them.
		sig.Open = true
	case !hasProps && !hasAddl:
		sig.Open = true
	}
	return sig
}

// composed reports whether a schema takes keys from subschemas applied in place.
func composed(top map[string]json.RawMessage) bool {
	for _, k := range []string{"allOf", "anyOf", "oneOf", "$ref", "$dynamicRef", "if", "then", "else", "dependentSchemas", "dependencies", "unevaluatedProperties"} {
		if _, ok := top[k]; ok {
			return true
		}
	}
	return false
}

// objectKeys returns the keys of the JSON object raw in the order they appear (nil when raw is
// not an object).
func objectKeys(raw json.RawMessage) []string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	keys := []string{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return keys
		}
		k, _ := tok.(string)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return keys
		}
		keys = append(keys, k)
	}
	return keys
}

// CheckKeywords checks a program's arguments against the binding's keyword set: an argument the
// tool does not take, or a required one missing, is invalid_arguments naming it.
func (t *Tool) CheckKeywords(args map[string]any) *failure.Error {
	sig := t.Signature()
	return sig.check(t.Name, args)
}

func (sig Signature) check(name string, args map[string]any) *failure.Error {
	if !sig.Open {
		known := make(map[string]bool, len(sig.Params))
		for _, p := range sig.Params {
			known[p] = true
		}
		var unknown []string
		for k := range args {
			if !known[k] {
				unknown = append(unknown, k)
			}
		}
		sort.Strings(unknown)
		if len(unknown) > 0 {
			k := unknown[0]
			msg := fmt.Sprintf("%s takes no argument %s", name, strconv.Quote(clip(k, 100)))
			if near, ok := nearest.Name(k, sig.Params); ok {
				msg += fmt.Sprintf(" (did you mean %q?)", near)
			}
			if len(sig.Params) == 0 {
				msg += "; it takes no arguments"
			} else {
				msg += "; it takes " + clip(strings.Join(sig.Params, ", "), 400)
			}
			return refusal(failure.InvalidArguments, "%s", msg)
		}
	}
	for _, r := range sig.Required {
		if _, ok := args[r]; !ok {
			return refusal(failure.InvalidArguments, "%s is missing its required argument %s", name, strconv.Quote(clip(r, 100)))
		}
	}
	return nil
}

// Bounds on a stub: nested objects deeper than stubDepth, or a stub larger than stubBytes, are
// typed Any.
const (
	stubDepth = 6
	stubBytes = 32 << 10
)

// stubNames are the names a stub's annotations use: a TypedDict field of one of these names
// would shadow it inside the class body, so such a class takes the functional form.
var stubNames = map[string]bool{"Any": true, "Literal": true, "NotRequired": true, "TypedDict": true,
	"str": true, "int": true, "float": true, "bool": true, "list": true, "dict": true}

// stubHeader is the import line every stub starts with.
const stubHeader = "from typing import Any, Literal, NotRequired, TypedDict\n"

// PythonStub renders the tool as a Python stub (.pyi syntax): an async function with keyword
// parameters named and typed from the input schema (required first, optional ones defaulting to
// ...), enums as Literal, nested objects as TypedDict, and the return type from the output
// schema (Any without one). A tool without an alias (its name is not a Python identifier) is
// rendered as the call_tool it is called through, its arguments a TypedDict.
func (t *Tool) PythonStub() string { return t.pythonStubReturning(nil, OutputType{}) }

// pythonStubReturning is PythonStub with the return type from observed, a JSON Schema of the
// results seen (nil: none), marked by a comment saying so and how many results it comes from.
func (t *Tool) pythonStubReturning(observed []byte, ot OutputType) string {
	s := t.pythonStub(stubDepth, observed, ot)
	if len(s) > stubBytes {
		s = t.pythonStub(0, observed, ot)
	}
	if len(s) > stubBytes {
		// Still too large (huge enums): the names alone, every type Any.
		s = t.plainStub()
	}
	return s
}

// plainStub is the stub of last resort: the keywords without types.
func (t *Tool) plainStub() string {
	var b strings.Builder
	b.WriteString(stubHeader + "\n")
	sig := t.Signature()
	alias := t.Alias()
	parts := []string{}
	for _, p := range sig.Params {
		if !Aliasable(p) || len(p) > 100 {
			alias = ""
		}
	}
	if alias == "" {
		fmt.Fprintf(&b, "async def call_tool(name: Literal[%s], arguments: dict[str, Any]) -> Any:\n    ...\n", pyString(t.Name))
		return b.String()
	}
	req := map[string]bool{}
	for _, r := range sig.Required {
		req[r] = true
	}
	for _, p := range sig.Params {
		if req[p] {
			parts = append(parts, p+": Any")
		}
	}
	for _, p := range sig.Params {
		if !req[p] {
			parts = append(parts, p+": Any = ...")
		}
	}
	if len(parts) > 0 {
		parts = append([]string{"*"}, parts...)
	}
	if sig.Open {
		parts = append(parts, "**"+(&stubGen{}).free(paramsOf(sig.Params))+": Any")
	}
	fmt.Fprintf(&b, "async def %s(%s) -> Any:\n    ...\n", alias, strings.Join(parts, ", "))
	return b.String()
}

func paramsOf(names []string) []stubParam {
	out := make([]stubParam, len(names))
	for i, n := range names {
		out[i].name = n
	}
	return out
}

func (t *Tool) pythonStub(depth int, observed []byte, ot OutputType) string {
	g := &stubGen{depth: depth, used: map[string]bool{}}
	base := className(t.Name)
	var in, out map[string]json.RawMessage
	var inRaw, outRaw []byte
	if t.Def != nil && t.Def.InputSchema != nil {
		inRaw, _ = json.Marshal(t.Def.InputSchema)
		_ = json.Unmarshal(inRaw, &in)
	}
	if t.Def != nil && t.Def.OutputSchema != nil {
		outRaw, _ = json.Marshal(t.Def.OutputSchema)
		_ = json.Unmarshal(outRaw, &out)
	} else if observed != nil {
		_ = json.Unmarshal(observed, &out)
	}
	ret := "Any"
	if out != nil {
		ret = g.typeOf(out, base+"Result", 0)
	}
	var note string
	if observed != nil && ot.Source == OutputObserved {
		note = fmt.Sprintf("# the return type is observed, not declared: the shape of the %d results seen", ot.Samples)
		if len(ot.Drift) > 0 {
			note += " (it changed: get_tool_info's output_type.drift says how)"
		}
		note += "\n"
	}
	sig := t.Signature()
	params := g.params(in, base, sig)
	doc := pyDocString(t)
	var b strings.Builder
	b.WriteString(stubHeader)
	for _, c := range g.classes {
		b.WriteString("\n")
		b.WriteString(c)
	}
	b.WriteString("\n")
	identOK := true
	for _, p := range params {
		if !Aliasable(p.name) {
			identOK = false
		}
	}
	if alias := t.Alias(); alias != "" && identOK {
		b.WriteString(note)
		fmt.Fprintf(&b, "async def %s(", alias)
		var parts []string
		if len(params) > 0 {
			parts = append(parts, "*")
		}
		for _, p := range params {
			if p.required {
				parts = append(parts, p.name+": "+p.typ)
			}
		}
		for _, p := range params {
			if !p.required {
				parts = append(parts, p.name+": "+p.typ+" = ...")
			}
		}
		if sig.Open {
			parts = append(parts, "**"+g.free(params)+": Any")
		}
		b.WriteString(strings.Join(parts, ", "))
		fmt.Fprintf(&b, ") -> %s:\n%s    ...\n", ret, doc)
		return b.String()
	}
	// No alias, or a parameter that cannot be a keyword: the arguments as a TypedDict given to
	// call_tool (or to the alias as **arguments).
	td := g.name(base + "Arguments")
	fields := map[string]string{}
	keys := make([]string, 0, len(params))
	req := map[string]bool{}
	for _, p := range params {
		fields[p.name], req[p.name] = p.typ, p.required
		keys = append(keys, p.name)
	}
	b.WriteString(typedDict(td, keys, fields, req))
	b.WriteString("\n")
	if alias := t.Alias(); alias != "" {
		fmt.Fprintf(&b, "# call it as %s(**arguments) with arguments a %s\n", alias, td)
		b.WriteString(note)
		fmt.Fprintf(&b, "async def %s(**arguments: Any) -> %s:\n%s    ...\n", alias, ret, doc)
		return b.String()
	}
	fmt.Fprintf(&b, "# %s has no alias (its name is not a Python identifier): call it through call_tool\n", pyComment(t.Name))
	b.WriteString(note)
	fmt.Fprintf(&b, "async def call_tool(name: Literal[%s], arguments: %s) -> %s:\n%s    ...\n", pyString(t.Name), td, ret, doc)
	return b.String()
}

// stubParam is one keyword parameter of a stub.
type stubParam struct {
	name, typ string
	required  bool
}

// stubGen renders the types of one stub, collecting the TypedDict classes it needs.
type stubGen struct {
	depth   int
	classes []string
	used    map[string]bool
}

func (g *stubGen) params(in map[string]json.RawMessage, base string, sig Signature) []stubParam {
	var props map[string]json.RawMessage
	_ = json.Unmarshal(in["properties"], &props)
	req := map[string]bool{}
	for _, r := range sig.Required {
		req[r] = true
	}
	out := make([]stubParam, 0, len(sig.Params))
	for _, name := range sig.Params {
		var s map[string]json.RawMessage
		_ = json.Unmarshal(props[name], &s)
		out = append(out, stubParam{name: name, typ: g.typeOf(s, base+className(name), 1), required: req[name]})
	}
	return out
}

// free returns a name for the **keywords parameter that no parameter has.
func (g *stubGen) free(params []stubParam) string {
	n := "arguments"
	for taken := true; taken; {
		taken = false
		for _, p := range params {
			if p.name == n {
				n, taken = "_"+n, true
			}
		}
	}
	return n
}

// name returns a class name not yet used in this stub.
func (g *stubGen) name(want string) string {
	n := want
	for i := 2; g.used[n]; i++ {
		n = want + strconv.Itoa(i)
	}
	g.used[n] = true
	return n
}

// typeOf renders the Python type of schema s (nil: any value); hint names a TypedDict it needs.
func (g *stubGen) typeOf(s map[string]json.RawMessage, hint string, depth int) string {
	if s == nil {
		return "Any"
	}
	if c, ok := s["const"]; ok {
		if lit, ok := pyLiteral(c); ok {
			return "Literal[" + lit + "]"
		}
	}
	if e, ok := s["enum"]; ok {
		var vals []json.RawMessage
		if json.Unmarshal(e, &vals) == nil && len(vals) > 0 && len(vals) <= 200 {
			lits := make([]string, 0, len(vals))
			all := true
			for _, v := range vals {
				lit, ok := pyLiteral(v)
				if !ok {
					all = false
					break
				}
				lits = append(lits, lit)
			}
			if all {
				return "Literal[" + strings.Join(lits, ", ") + "]"
			}
		}
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		var alts []map[string]json.RawMessage
		if json.Unmarshal(s[k], &alts) == nil && len(alts) > 0 {
			var ts []string
			for i, a := range alts {
				ts = append(ts, g.typeOf(a, hint+strconv.Itoa(i+1), depth))
			}
			return union(ts)
		}
	}
	var types []string
	if raw, ok := s["type"]; ok {
		var one string
		if json.Unmarshal(raw, &one) == nil {
			types = []string{one}
		} else {
			_ = json.Unmarshal(raw, &types)
		}
	}
	if len(types) == 0 {
		if _, ok := s["properties"]; ok {
			types = []string{"object"}
		} else {
			return "Any"
		}
	}
	var ts []string
	for _, ty := range types {
		ts = append(ts, g.simple(ty, s, hint, depth))
	}
	return union(ts)
}

func (g *stubGen) simple(ty string, s map[string]json.RawMessage, hint string, depth int) string {
	switch ty {
	case "string":
		return "str"
	case "integer":
		return "int"
	case "number":
		return "float"
	case "boolean":
		return "bool"
	case "null":
		return "None"
	case "array":
		var items map[string]json.RawMessage
		if json.Unmarshal(s["items"], &items) != nil || items == nil {
			return "list[Any]"
		}
		return "list[" + g.typeOf(items, hint+"Item", depth) + "]"
	case "object":
		keys := objectKeys(s["properties"])
		if len(keys) == 0 || depth >= g.depth {
			var addl map[string]json.RawMessage
			if json.Unmarshal(s["additionalProperties"], &addl) == nil && addl != nil && depth < g.depth {
				return "dict[str, " + g.typeOf(addl, hint+"Value", depth+1) + "]"
			}
			return "dict[str, Any]"
		}
		var props map[string]json.RawMessage
		_ = json.Unmarshal(s["properties"], &props)
		var reqList []string
		_ = json.Unmarshal(s["required"], &reqList)
		req := map[string]bool{}
		for _, r := range reqList {
			req[r] = true
		}
		name := g.name(hint)
		fields := map[string]string{}
		for _, k := range keys {
			var ps map[string]json.RawMessage
			_ = json.Unmarshal(props[k], &ps)
			fields[k] = g.typeOf(ps, hint+className(k), depth+1)
		}
		g.classes = append(g.classes, typedDict(name, keys, fields, req))
		return name
	}
	return "Any"
}

// typedDict renders a TypedDict class; keys that are not identifiers take the functional form.
func typedDict(name string, keys []string, fields map[string]string, req map[string]bool) string {
	field := func(k string) string {
		if req[k] {
			return fields[k]
		}
		return "NotRequired[" + fields[k] + "]"
	}
	ident := true
	for _, k := range keys {
		if !Aliasable(k) || stubNames[k] {
			ident = false
		}
	}
	var b strings.Builder
	if !ident {
		fmt.Fprintf(&b, "%s = TypedDict(%s, {", name, pyString(name))
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s: %s", pyString(k), field(k))
		}
		b.WriteString("})\n")
		return b.String()
	}
	fmt.Fprintf(&b, "class %s(TypedDict):\n", name)
	if len(keys) == 0 {
		b.WriteString("    pass\n")
	}
	for _, k := range keys {
		fmt.Fprintf(&b, "    %s: %s\n", k, field(k))
	}
	return b.String()
}

func union(ts []string) string {
	seen := map[string]bool{}
	var out []string
	for _, t := range ts {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	for _, t := range out {
		if t == "Any" {
			return "Any"
		}
	}
	return strings.Join(out, " | ")
}

// pyLiteral renders a JSON scalar that typing.Literal accepts: a string, an integer, a
// boolean or null.
func pyLiteral(raw json.RawMessage) (string, bool) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return "", false
	}
	switch x := v.(type) {
	case string:
		return pyString(x), true
	case bool:
		if x {
			return "True", true
		}
		return "False", true
	case nil:
		return "None", true
	case json.Number:
		if _, err := strconv.ParseInt(x.String(), 10, 64); err == nil {
			return x.String(), true
		}
	}
	return "", false
}

// pyString renders s as a Python string literal (ASCII, every non-printable escaped).
func pyString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(&b, "\\x%02x", r)
		case r <= 0xffff:
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			fmt.Fprintf(&b, "\\U%08x", r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// pyComment makes s safe inside a one-line comment.
func pyComment(s string) string {
	return clip(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || isLineBreak(r) {
			return ' '
		}
		return r
	}, s), 200)
}

// pyDocString renders the tool's one-line summary and its parameters' descriptions as the
// body's docstring, indented, each line free of control characters and quotes that would end it.
func pyDocString(t *Tool) string {
	lines := []string{}
	if t.Def != nil {
		if s := t.Summary(); s != "" {
			lines = append(lines, s)
		}
		if t.Def.InputSchema != nil {
			raw, _ := json.Marshal(t.Def.InputSchema)
			var in struct {
				Properties map[string]struct {
					Description string `json:"description"`
				} `json:"properties"`
			}
			_ = json.Unmarshal(raw, &in)
			for _, k := range t.Signature().Params {
				if d := in.Properties[k].Description; d != "" {
					lines = append(lines, k+": "+pyComment(d))
				}
			}
		}
	}
	if len(lines) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("    \"\"\"")
	for i, l := range lines {
		l = strings.ReplaceAll(strings.ReplaceAll(pyComment(l), "\\", "\\\\"), "\"", "\\\"")
		if i > 0 {
			b.WriteString("\n    ")
		}
		b.WriteString(l)
	}
	b.WriteString("\"\"\"\n")
	return b.String()
}

// className makes a CamelCase identifier part of s: letters and digits kept, every other
// character a word break; never empty, never starting with a digit.
func className(s string) string {
	var b strings.Builder
	up := true
	for _, r := range s {
		if r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			if up {
				r = unicode.ToUpper(r)
				up = false
			}
			b.WriteRune(r)
			continue
		}
		up = true
	}
	out := b.String()
	if out == "" || out[0] >= '0' && out[0] <= '9' {
		out = "T" + out
	}
	if len(out) > 60 {
		out = out[:60]
	}
	return out
}
