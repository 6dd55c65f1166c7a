package toolshape

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// StubOf is what a tool's Python stub is rendered from.
type StubOf struct {
	// Name is the model-facing name, which call_tool takes; Alias the Python name bound to the
	// tool ("" when Name is not one).
	Name, Alias string
	// Summary is the first line of the tool's description, the docstring's first line.
	Summary string
	// Input is the tool's input schema; nil: any keywords.
	Input *Input
	// Output is the return type's schema: the declared output schema, or the type observed of
	// the tool's results; nil: Any.
	Output *Schema
	// Observed, when not zero, says the Output is observed rather than declared: from how many
	// results, and whether they drifted from it.
	Observed struct {
		Samples int
		Drifted bool
	}
}

// Bounds on a stub: nested objects deeper than StubDepth, or a stub larger than MaxStubBytes, are
// typed Any.
const (
	StubDepth    = 6
	MaxStubBytes = 32 << 10
)

// stubNames are the names a stub's annotations use: a TypedDict field of one of these names
// would shadow it inside the class body, so such a class takes the functional form.
var stubNames = map[string]bool{"Any": true, "Literal": true, "NotRequired": true, "TypedDict": true,
	"str": true, "int": true, "float": true, "bool": true, "list": true, "dict": true}

// stubHeader is the import line every stub starts with.
const stubHeader = "from typing import Any, Literal, NotRequired, TypedDict\n"

// Stub renders the tool as a Python stub (.pyi syntax): an async function with keyword
// parameters named and typed from the input schema (required first, optional ones defaulting to
// ...), enums as Literal, nested objects as TypedDict, and the return type from the output
// schema (Any without one; an observed one marked by a comment saying so and how many results
// it comes from). A tool without an alias (its name is not a Python identifier) is rendered as
// the call_tool it is called through, its arguments a TypedDict.
func Stub(t StubOf) string {
	s := t.stub(StubDepth)
	if len(s) > MaxStubBytes {
		s = t.stub(0)
	}
	if len(s) > MaxStubBytes {
		// Still too large (huge enums): the names alone, every type Any.
		s = t.plainStub()
	}
	return s
}

// plainStub is the stub of last resort: the keywords without types.
func (t StubOf) plainStub() string {
	var b strings.Builder
	b.WriteString(stubHeader + "\n")
	sig := t.Input.Signature()
	alias := t.Alias
	parts := []string{}
	for _, p := range sig.Params {
		if !Aliasable(p) || len(p) > 100 {
			alias = ""
		}
	}
	if alias == "" {
		fmt.Fprintf(&b, "async def call_tool(name: Literal[%s], arguments: dict[str, Any]) -> Any:\n    ...\n", PythonString(t.Name))
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

func (t StubOf) stub(depth int) string {
	g := &stubGen{depth: depth, used: map[string]bool{}}
	base := className(t.Name)
	ret := "Any"
	if t.Output != nil {
		ret = g.typeOf(t.Output, base+"Result", 0)
	}
	var note string
	if t.Observed.Samples > 0 {
		note = fmt.Sprintf("# the return type is observed, not declared: the shape of the %d results seen", t.Observed.Samples)
		if t.Observed.Drifted {
			note += " (it changed: get_tool_info's output_type.drift says how)"
		}
		note += "\n"
	}
	sig := t.Input.Signature()
	params := g.params(t.Input.Schema(), base, sig)
	doc := t.docString()
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
	if t.Alias != "" && identOK {
		b.WriteString(note)
		fmt.Fprintf(&b, "async def %s(", t.Alias)
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
	if t.Alias != "" {
		fmt.Fprintf(&b, "# call it as %s(**arguments) with arguments a %s\n", t.Alias, td)
		b.WriteString(note)
		fmt.Fprintf(&b, "async def %s(**arguments: Any) -> %s:\n%s    ...\n", t.Alias, ret, doc)
		return b.String()
	}
	fmt.Fprintf(&b, "# %s has no alias (its name is not a Python identifier): call it through call_tool\n", pyComment(t.Name))
	b.WriteString(note)
	fmt.Fprintf(&b, "async def call_tool(name: Literal[%s], arguments: %s) -> %s:\n%s    ...\n", PythonString(t.Name), td, ret, doc)
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

func (g *stubGen) params(in *Schema, base string, sig Signature) []stubParam {
	req := map[string]bool{}
	for _, r := range sig.Required {
		req[r] = true
	}
	out := make([]stubParam, 0, len(sig.Params))
	for _, name := range sig.Params {
		s, _ := in.Property(name)
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
func (g *stubGen) typeOf(s *Schema, hint string, depth int) string {
	if s == nil {
		return "Any"
	}
	if s.konst != nil {
		if lit, ok := pyLiteral(s.konst); ok {
			return "Literal[" + lit + "]"
		}
	}
	if len(s.enum) > 0 && len(s.enum) <= 200 {
		lits := make([]string, 0, len(s.enum))
		all := true
		for _, v := range s.enum {
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
	if len(s.alternatives) > 0 {
		var ts []string
		for i, a := range s.alternatives {
			ts = append(ts, g.typeOf(a, hint+strconv.Itoa(i+1), depth))
		}
		return union(ts)
	}
	types := s.types
	if len(types) == 0 {
		if !s.hasProperties {
			return "Any"
		}
		types = []string{"object"}
	}
	var ts []string
	for _, ty := range types {
		ts = append(ts, g.simple(ty, s, hint, depth))
	}
	return union(ts)
}

func (g *stubGen) simple(ty string, s *Schema, hint string, depth int) string {
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
		if s.items == nil {
			return "list[Any]"
		}
		return "list[" + g.typeOf(s.items, hint+"Item", depth) + "]"
	case "object":
		keys := s.propertyNames()
		if len(keys) == 0 || depth >= g.depth {
			if s.additional != nil && depth < g.depth {
				return "dict[str, " + g.typeOf(s.additional, hint+"Value", depth+1) + "]"
			}
			return "dict[str, Any]"
		}
		req := map[string]bool{}
		for _, r := range s.required {
			req[r] = true
		}
		name := g.name(hint)
		fields := map[string]string{}
		for _, k := range keys {
			ps, _ := s.Property(k)
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
		fmt.Fprintf(&b, "%s = TypedDict(%s, {", name, PythonString(name))
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s: %s", PythonString(k), field(k))
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
		return PythonString(x), true
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

// pyComment makes s safe inside a one-line comment.
func pyComment(s string) string {
	return Clip(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || IsLineBreak(r) {
			return ' '
		}
		return r
	}, s), 200)
}

// docString renders the tool's one-line summary and its parameters' descriptions as the
// body's docstring, indented, each line free of control characters and quotes that would end it.
func (t StubOf) docString() string {
	lines := []string{}
	if t.Summary != "" {
		lines = append(lines, t.Summary)
	}
	in := t.Input.Schema()
	for _, k := range t.Input.Signature().Params {
		if p, _ := in.Property(k); p != nil && p.description != "" {
			lines = append(lines, k+": "+pyComment(p.description))
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
