package toolshape

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp/syntax"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Bounds on an upstream tool's input schema and on checking one call's arguments against it.
// An upstream is untrusted: its schema must not be able to crash the process (a $ref cycle
// that consumes no input recurses until the goroutine stack overflows, a fatal error no
// recover catches) or hang it (fan-out through allOf/anyOf and $ref multiplies the validator's
// work per argument, a huge enum or pattern multiplies the work per step).
const (
	// MaxSchemaBytes bounds one tool's input schema (its JSON); a larger one makes the tool
	// unavailable, since a schema cannot be cut.
	MaxSchemaBytes = 64 << 10
	// maxSchemaDepth bounds the JSON nesting of one schema document.
	maxSchemaDepth = 64
	// maxCheckDepth bounds the nested validation steps checking one call's arguments.
	maxCheckDepth = 256
	// maxCheckCost bounds the validator's work for one call, in units of about a byte it
	// compares, formats, copies or matches (boundWalk.visit); visitCost is one step's fixed
	// cost.
	// Measured in BenchmarkCheckBound: a check at this bound takes 0.1 to 0.8 s on a loaded
	// 2-core machine (the slowest: a regular expression over 4 MiB of arguments).
	maxCheckCost = 1 << 27
	visitCost    = 256
)

// validator is an upstream input schema compiled for validation, with the graph that bounds
// the validator's work before it runs.
type validator struct {
	rs *jsonschema.Resolved
	g  *schemaGraph
}

// compile compiles b, a tool's input schema (JSON) as its server sent it, at most
// MaxSchemaBytes. It returns the schema to check arguments with (nil: none, the upstream
// judges), or a reason, safe to show a model, why the tool must be unavailable, or an error
// saying why the schema is not used (logged; the tool stays callable, unvalidated).
//
// A schema stating a draft other than 2020-12 or draft-07 is compiled as if it stated none
// (2020-12 rules), which accepts what older drafts accept in nearly every schema a tool sends.
// Remote references are never fetched: a schema that needs one does not compile.
func compile(b []byte) (in *validator, unavailable string, err error) {
	if NestingDepth(b) > maxSchemaDepth {
		return nil, fmt.Sprintf("its input schema nests deeper than %d levels", maxSchemaDepth), nil
	}
	defer func() {
		if p := recover(); p != nil {
			in, unavailable, err = nil, "", fmt.Errorf("the schema library failed on it: %v", p)
		}
	}()
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, "", err
	}
	switch strings.TrimSuffix(s.Schema, "#") {
	case "http://json-schema.org/draft-07/schema", "https://json-schema.org/draft-07/schema":
		s.Schema = "http://json-schema.org/draft-07/schema#"
	default:
		s.Schema = ""
	}
	opts := &jsonschema.ResolveOptions{Loader: refuseRemote}
	rs, err := s.Resolve(opts)
	if err != nil && s.Schema != "" {
		s.Schema = ""
		if rs2, err2 := s.Resolve(opts); err2 == nil {
			rs, err = rs2, nil
		}
	}
	if err != nil {
		return nil, "", err
	}
	g, err := newSchemaGraph(&s, s.Schema != "")
	if err != nil {
		return nil, "", fmt.Errorf("its references cannot be bounded here: %w", err)
	}
	if at, ok := g.inPlaceCycle(); ok {
		return nil, fmt.Sprintf("its input schema refers to itself without descending into the arguments (a $ref cycle through %q), so no arguments could ever be checked against it", Clip(at, 200)), nil
	}
	return &validator{rs: rs, g: g}, "", nil
}

// errRemoteRef is what the loader answers: a schema is never fetched from anywhere.
var errRemoteRef = errors.New("remote schema references are never fetched")

func refuseRemote(*url.URL) (*jsonschema.Schema, error) { return nil, errRemoteRef }

// errCheckBound is why arguments were not checked: checking them would pass the bounds.
var errCheckBound = errors.New("checking them against the input schema would exceed this host's bound on validation work (the arguments are too large or too deeply nested for this schema)")

// check validates args (decoded JSON) against the schema, first bounding the work that takes.
func (in *validator) check(args any) (err error) {
	if !in.g.withinBounds(args) {
		return errCheckBound
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the schema library failed while checking them: %v", p)
		}
	}()
	return in.rs.Validate(args)
}

// NestingDepth is the deepest nesting of arrays and objects in the JSON text b.
func NestingDepth(b []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

// schemaGraph is what bounding validation needs of a resolved schema: for each subschema, the
// subschemas applied to the same instance (in place: $ref, $dynamicRef, allOf, anyOf, oneOf,
// not, if/then/else, dependentSchemas), and the bytes an error about it formats. It mirrors
// how jsonschema-go resolves references (base URIs from $id, anchors, JSON Pointers over
// schema fields); a reference it cannot follow the same way makes newSchemaGraph fail, and the
// schema is then not used at all rather than used unbounded.
type schemaGraph struct {
	root    *jsonschema.Schema
	inPlace map[*jsonschema.Schema][]*jsonschema.Schema
	// refOnly marks a draft-07 schema with $ref, whose other keywords validation ignores.
	refOnly map[*jsonschema.Schema]bool
	weight  map[*jsonschema.Schema]int64 // bytes an error message about it carries
	prog    map[string]int64             // compiled size of each regular expression
	path    map[*jsonschema.Schema]string
}

// schemaChild is one subschema under a keyword: key is the property or definition name, or
// the index in an array keyword.
type schemaChild struct {
	keyword, key string
	s            *jsonschema.Schema
}

// children lists s's immediate subschemas, every keyword that holds one.
func children(s *jsonschema.Schema) []schemaChild {
	var out []schemaChild
	one := func(k string, c *jsonschema.Schema) {
		if c != nil {
			out = append(out, schemaChild{k, "", c})
		}
	}
	many := func(k string, cs []*jsonschema.Schema) {
		for i, c := range cs {
			if c != nil {
				out = append(out, schemaChild{k, strconv.Itoa(i), c})
			}
		}
	}
	named := func(k string, m map[string]*jsonschema.Schema) {
		for n, c := range m {
			if c != nil {
				out = append(out, schemaChild{k, n, c})
			}
		}
	}
	one("additionalItems", s.AdditionalItems)
	one("additionalProperties", s.AdditionalProperties)
	one("contains", s.Contains)
	one("contentSchema", s.ContentSchema)
	one("else", s.Else)
	one("if", s.If)
	one("items", s.Items)
	one("not", s.Not)
	one("propertyNames", s.PropertyNames)
	one("then", s.Then)
	one("unevaluatedItems", s.UnevaluatedItems)
	one("unevaluatedProperties", s.UnevaluatedProperties)
	many("allOf", s.AllOf)
	many("anyOf", s.AnyOf)
	many("oneOf", s.OneOf)
	many("prefixItems", s.PrefixItems)
	many("items", s.ItemsArray)
	named("$defs", s.Defs)
	named("definitions", s.Definitions)
	named("dependentSchemas", s.DependentSchemas)
	named("dependencies", s.DependencySchemas)
	named("patternProperties", s.PatternProperties)
	named("properties", s.Properties)
	return out
}

type anchor struct {
	s       *jsonschema.Schema
	dynamic bool
}

// newSchemaGraph reads root's graph (draft7: by draft-07's rules of $id and $ref): first its
// scopes, then each subschema's in-place applications and weight.
func newSchemaGraph(root *jsonschema.Schema, draft7 bool) (*schemaGraph, error) {
	sc := &scopes{
		draft7:  draft7,
		uri:     map[*jsonschema.Schema]*url.URL{root: {}},
		base:    map[*jsonschema.Schema]*jsonschema.Schema{},
		docs:    map[string]*jsonschema.Schema{"": root},
		anchors: map[*jsonschema.Schema]map[string]anchor{},
		path:    map[*jsonschema.Schema]string{},
	}
	if err := sc.walk(root, root, ""); err != nil {
		return nil, err
	}
	g := &schemaGraph{
		root:    root,
		inPlace: map[*jsonschema.Schema][]*jsonschema.Schema{},
		refOnly: map[*jsonschema.Schema]bool{},
		weight:  map[*jsonschema.Schema]int64{},
		prog:    map[string]int64{},
		path:    sc.path,
	}
	dynamic := map[string][]*jsonschema.Schema{}
	for _, s := range sc.order {
		if s.DynamicAnchor != "" {
			dynamic[s.DynamicAnchor] = append(dynamic[s.DynamicAnchor], s)
		}
	}
	for _, s := range sc.order {
		if err := g.add(s, sc, dynamic); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// scopes are a schema's bases, documents and anchors, as jsonschema-go's resolveURIs assigns
// them: what a $ref or $dynamicRef is resolved against.
type scopes struct {
	draft7  bool
	uri     map[*jsonschema.Schema]*url.URL           // of each base
	base    map[*jsonschema.Schema]*jsonschema.Schema // of each schema
	docs    map[string]*jsonschema.Schema
	anchors map[*jsonschema.Schema]map[string]anchor
	path    map[*jsonschema.Schema]string // each schema's JSON Pointer from the root
	order   []*jsonschema.Schema          // every schema, in the order walked
}

func (sc *scopes) setAnchor(b *jsonschema.Schema, name string, s *jsonschema.Schema, dynamic bool) {
	if name == "" {
		return
	}
	if sc.anchors[b] == nil {
		sc.anchors[b] = map[string]anchor{}
	}
	sc.anchors[b][name] = anchor{s, dynamic}
}

// walk records s, at path under base b, and every schema below it.
func (sc *scopes) walk(s, b *jsonschema.Schema, path string) error {
	if s.ID != "" && !(sc.draft7 && s.Ref != "") {
		id, err := url.Parse(s.ID)
		if err != nil {
			return err
		}
		if sc.draft7 && id.Fragment != "" {
			sc.setAnchor(b, strings.TrimPrefix(s.ID, "#"), s, false)
		} else {
			u := sc.uri[b].ResolveReference(id)
			if !u.IsAbs() {
				return fmt.Errorf("$id %s is not absolute", s.ID)
			}
			sc.uri[s], sc.docs[u.String()], b = u, s, s
		}
	}
	sc.base[s] = b
	if !sc.draft7 {
		sc.setAnchor(b, s.Anchor, s, false)
		sc.setAnchor(b, s.DynamicAnchor, s, true)
	}
	sc.path[s] = path
	sc.order = append(sc.order, s)
	for _, c := range children(s) {
		p := path + "/" + c.keyword
		if c.key != "" {
			p += "/" + c.key
		}
		if err := sc.walk(c.s, b, p); err != nil {
			return err
		}
	}
	return nil
}

// resolve follows ref from s as jsonschema-go's resolveRef does; dyn is the anchor name when
// the target is a dynamic anchor.
func (sc *scopes) resolve(s *jsonschema.Schema, ref string) (t *jsonschema.Schema, dyn string, err error) {
	r, err := url.Parse(ref)
	if err != nil {
		return nil, "", err
	}
	full := sc.uri[sc.base[s]].ResolveReference(r)
	fragless := *full
	fragless.Fragment = ""
	doc := sc.docs[fragless.String()]
	if doc == nil {
		return nil, "", fmt.Errorf("$ref %q leaves the schema", Clip(ref, 200))
	}
	if f := full.Fragment; f != "" && !strings.HasPrefix(f, "/") {
		a, ok := sc.anchors[doc][f]
		if !ok {
			return nil, "", fmt.Errorf("no anchor %q", Clip(f, 200))
		}
		if a.dynamic {
			return a.s, f, nil
		}
		return a.s, "", nil
	}
	t, err = pointer(doc, full.Fragment)
	return t, "", err
}

// add records s in the graph: the schemas it applies in place (its references resolved in
// sc; a $dynamicRef to a dynamic anchor may be any schema of that anchor in dynamic), the
// bytes an error about it carries, and the size of its regular expressions.
func (g *schemaGraph) add(s *jsonschema.Schema, sc *scopes, dynamic map[string][]*jsonschema.Schema) error {
	var in []*jsonschema.Schema
	if s.Ref != "" {
		t, _, err := sc.resolve(s, s.Ref)
		if err != nil {
			return err
		}
		in = append(in, t)
		if sc.draft7 {
			// "All other properties in a $ref object MUST be ignored."
			g.inPlace[s], g.refOnly[s] = in, true
			g.weight[s] = int64(len(g.path[s]) + len(s.ID))
			return nil
		}
	}
	if s.DynamicRef != "" {
		t, name, err := sc.resolve(s, s.DynamicRef)
		if err != nil {
			return err
		}
		in = append(in, t)
		if name != "" {
			// Resolved at validation time from the dynamic scope: any schema with that
			// dynamic anchor may be the one.
			in = append(in, dynamic[name]...)
		}
	}
	in = append(in, s.AllOf...)
	in = append(in, s.AnyOf...)
	in = append(in, s.OneOf...)
	for _, c := range []*jsonschema.Schema{s.Not, s.If, s.Then, s.Else} {
		if c != nil {
			in = append(in, c)
		}
	}
	for _, m := range []map[string]*jsonschema.Schema{s.DependentSchemas, s.DependencySchemas} {
		for _, c := range m {
			in = append(in, c)
		}
	}
	g.inPlace[s] = in
	w := int64(len(g.path[s]) + len(s.ID) + len(s.Anchor) + len(s.DynamicAnchor) + len(s.Pattern) +
		32*(len(s.AllOf)+len(s.AnyOf)+len(s.OneOf)))
	for _, v := range []any{s.Enum, s.Const, s.Required, s.DependentRequired, s.DependencyStrings} {
		if b, err := json.Marshal(v); err == nil {
			w += int64(len(b))
		}
	}
	g.weight[s] = w
	if s.Pattern != "" {
		g.compiled(s.Pattern)
	}
	for p := range s.PatternProperties {
		g.compiled(p)
	}
	return nil
}

// compiled records the size of the program re's matcher runs: matching costs about that
// many steps per input byte.
func (g *schemaGraph) compiled(re string) {
	if _, ok := g.prog[re]; ok {
		return
	}
	n := int64(len(re))
	if r, err := syntax.Parse(re, syntax.Perl); err == nil {
		if p, err := syntax.Compile(r.Simplify()); err == nil {
			n = max(n, int64(len(p.Inst)))
		}
	}
	g.prog[re] = n
}

// pointer follows the JSON Pointer ptr from s over schema keywords, as jsonschema-go does.
func pointer(s *jsonschema.Schema, ptr string) (*jsonschema.Schema, error) {
	if ptr == "" {
		return s, nil
	}
	if ptr[0] != '/' {
		return nil, fmt.Errorf("JSON Pointer %q does not begin with '/'", Clip(ptr, 200))
	}
	segs := strings.Split(ptr[1:], "/")
	for i := range segs {
		segs[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(segs[i])
	}
	for i := 0; i < len(segs); i++ {
		at, err := under(s, segs[i])
		if err != nil {
			return nil, err
		}
		if at.single {
			if at.one == nil {
				return nil, errors.New("pointer to nothing")
			}
			s = at.one
			continue
		}
		if i+1 == len(segs) {
			return nil, errors.New("pointer to a keyword that holds several schemas")
		}
		i++
		if at.named != nil {
			c, ok := at.named[segs[i]]
			if !ok || c == nil {
				return nil, fmt.Errorf("no key %q", Clip(segs[i], 200))
			}
			s = c
			continue
		}
		list := at.list
		n, err := strconv.Atoi(segs[i])
		if err != nil || n < 0 || n >= len(list) || len(segs[i]) > 1 && segs[i][0] == '0' || list[n] == nil {
			return nil, fmt.Errorf("no index %q", Clip(segs[i], 200))
		}
		s = list[n]
	}
	return s, nil
}

// keywordSchemas is what one schema keyword holds: one schema (single), or several, listed
// (list) or named (named, never nil for a keyword of named schemas).
type keywordSchemas struct {
	one    *jsonschema.Schema
	single bool
	list   []*jsonschema.Schema
	named  map[string]*jsonschema.Schema
}

// under returns what keyword kw of s holds, as a JSON Pointer segment reads it; an error when
// kw is not a keyword that holds schemas.
func under(s *jsonschema.Schema, kw string) (keywordSchemas, error) {
	one := map[string]*jsonschema.Schema{"additionalItems": s.AdditionalItems, "additionalProperties": s.AdditionalProperties,
		"contains": s.Contains, "contentSchema": s.ContentSchema, "else": s.Else, "if": s.If, "not": s.Not,
		"propertyNames": s.PropertyNames, "then": s.Then, "unevaluatedItems": s.UnevaluatedItems,
		"unevaluatedProperties": s.UnevaluatedProperties}
	if c, ok := one[kw]; ok {
		return keywordSchemas{one: c, single: true}, nil
	}
	switch kw {
	case "items":
		return keywordSchemas{one: s.Items, list: s.ItemsArray, single: s.Items != nil}, nil
	case "allOf":
		return keywordSchemas{list: s.AllOf}, nil
	case "anyOf":
		return keywordSchemas{list: s.AnyOf}, nil
	case "oneOf":
		return keywordSchemas{list: s.OneOf}, nil
	case "prefixItems":
		return keywordSchemas{list: s.PrefixItems}, nil
	}
	named := map[string]map[string]*jsonschema.Schema{"$defs": s.Defs, "definitions": s.Definitions,
		"dependentSchemas": s.DependentSchemas, "dependencies": s.DependencySchemas,
		"patternProperties": s.PatternProperties, "properties": s.Properties}
	if m, ok := named[kw]; ok {
		if m == nil {
			m = map[string]*jsonschema.Schema{}
		}
		return keywordSchemas{named: m}, nil
	}
	return keywordSchemas{}, fmt.Errorf("JSON Pointer segment %q is not a schema keyword", Clip(kw, 200))
}

// inPlaceCycle finds a cycle of in-place applications: validating any instance against a
// schema on it recurses without end. It returns the path of a schema on the cycle.
func (g *schemaGraph) inPlaceCycle() (string, bool) {
	const (
		unseen = iota
		open
		done
	)
	state := map[*jsonschema.Schema]int{}
	type frame struct {
		s    *jsonschema.Schema
		next int
	}
	for start := range g.inPlace {
		if state[start] != unseen {
			continue
		}
		stack := []frame{{start, 0}}
		state[start] = open
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			if f.next == len(g.inPlace[f.s]) {
				state[f.s] = done
				stack = stack[:len(stack)-1]
				continue
			}
			c := g.inPlace[f.s][f.next]
			f.next++
			switch state[c] {
			case open:
				return g.path[c], true
			case unseen:
				state[c] = open
				stack = append(stack, frame{c, 0})
			}
		}
	}
	return "", false
}

// argNode is a decoded argument value with the size of its JSON, for bounding.
type argNode struct {
	size  int64
	str   bool
	keys  []string
	vals  []*argNode // an object's values, in keys' order
	elems []*argNode // an array's elements
}

func newArgNode(v any) *argNode {
	switch x := v.(type) {
	case map[string]any:
		n := &argNode{size: 2}
		for k, e := range x {
			c := newArgNode(e)
			n.keys, n.vals = append(n.keys, k), append(n.vals, c)
			n.size += int64(len(k)) + 4 + c.size
		}
		return n
	case []any:
		n := &argNode{size: 2}
		for _, e := range x {
			c := newArgNode(e)
			n.elems = append(n.elems, c)
			n.size += c.size + 1
		}
		return n
	case string:
		return &argNode{size: int64(len(x)) + 2, str: true}
	}
	return &argNode{size: 8}
}

// withinBounds walks args against the schema the way the validator would, taking every
// branch it might (every anyOf alternative, then and else, every pattern property), and
// reports whether the work stays within maxCheckDepth and maxCheckCost. The walk itself is
// bounded by the same budget.
func (g *schemaGraph) withinBounds(args any) bool {
	w := &boundWalk{g: g}
	return w.visit(g.root, newArgNode(args), 0)
}

type boundWalk struct {
	g    *schemaGraph
	cost int64
}

// visit charges one validation step of s on n: its fixed cost, an error that quotes the
// instance and the schema's keywords and is copied once per enclosing step, and a regular
// expression's matching. Then it visits what the validator would apply.
func (w *boundWalk) visit(s *jsonschema.Schema, n *argNode, depth int) bool {
	if depth > maxCheckDepth {
		return false
	}
	w.cost += visitCost + (n.size+w.g.weight[s])*int64(depth+1)
	if n.str && s.Pattern != "" {
		w.cost += n.size * w.g.prog[s.Pattern]
	}
	if w.cost > maxCheckCost {
		return false
	}
	for _, c := range w.g.inPlace[s] {
		if !w.visit(c, n, depth+1) {
			return false
		}
	}
	if w.g.refOnly[s] {
		return true
	}
	for i, k := range n.keys {
		v := n.vals[i]
		if c := s.Properties[k]; c != nil && !w.visit(c, v, depth+1) {
			return false
		}
		for re, c := range s.PatternProperties {
			w.cost += int64(len(k)+1) * w.g.prog[re]
			if !w.visit(c, v, depth+1) {
				return false
			}
		}
		for _, c := range []*jsonschema.Schema{s.AdditionalProperties, s.UnevaluatedProperties} {
			if c != nil && !w.visit(c, v, depth+1) {
				return false
			}
		}
		if s.PropertyNames != nil && !w.visit(s.PropertyNames, &argNode{size: int64(len(k)) + 2, str: true}, depth+1) {
			return false
		}
	}
	for i, e := range n.elems {
		apply := []*jsonschema.Schema{s.Items, s.AdditionalItems, s.Contains, s.UnevaluatedItems}
		if i < len(s.PrefixItems) {
			apply = append(apply, s.PrefixItems[i])
		}
		if i < len(s.ItemsArray) {
			apply = append(apply, s.ItemsArray[i])
		}
		for _, c := range apply {
			if c != nil && !w.visit(c, e, depth+1) {
				return false
			}
		}
	}
	return true
}
