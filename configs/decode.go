package configs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/mcp-sandbox/mcp-sandbox/internal/nearest"
)

// maxNodes bounds the work of decoding one document, counting every node an alias expands
// to, so a small file of nested aliases cannot make decoding exponential.
const maxNodes = 1 << 20

// decoder walks a yaml.Node tree into a value by its `yaml` struct tags, strictly: an unknown
// key, a duplicate key, a wrong type or an unsupported tag is a Problem naming the key path and
// line, and decoding carries on so that one pass reports them all. yaml.v3's own decoder is
// not used because its errors name Go types rather than key paths.
type decoder struct {
	source string
	pos    map[string]position
	ps     Problems
	nodes  int
	limit  int // nodes visited at most; 0 means maxNodes
}

func newDecoder(source string, pos map[string]position) *decoder {
	return &decoder{source: source, pos: pos}
}

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	d.ps = append(d.ps, Problem{Source: d.source, Line: n.Line, Column: n.Column, Path: path, Message: fmt.Sprintf(format, args...)})
}

var (
	byteSizeType   = reflect.TypeFor[ByteSize]()
	credentialType = reflect.TypeFor[Credential]()
	stateKeysType  = reflect.TypeFor[StateKeys]()
)

// knownTags are the tags decode understands; any other (a local tag like !env) is refused
// rather than silently read as its untagged value.
var knownTags = map[string]bool{
	"!!str": true, "!!int": true, "!!float": true, "!!bool": true, "!!null": true,
	"!!map": true, "!!seq": true, "!!timestamp": true, "!!binary": true,
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

// describe names what a node is, never what it holds: a misplaced secret must not be echoed.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a sequence"
	}
	switch n.ShortTag() {
	case "!!str":
		return "a string"
	case "!!int":
		return "an integer"
	case "!!float":
		return "a number"
	case "!!bool":
		return "a boolean"
	case "!!null":
		return "null"
	case "!!timestamp":
		return "a timestamp"
	}
	return "a " + n.ShortTag() + " value"
}

// decode sets v from n. A null leaves v at its zero value, which every type here reads as
// "absent".
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	limit := d.limit
	if limit == 0 {
		limit = maxNodes
	}
	if d.nodes++; d.nodes > limit {
		if d.nodes == limit+1 {
			d.fail(n, path, "document too large: more than %d nodes after expanding aliases", limit)
		}
		return
	}
	if tag := n.ShortTag(); !knownTags[tag] {
		d.fail(n, path, "unsupported tag %s", tag)
		return
	}
	if isNull(n) {
		return
	}
	t := v.Type()
	switch {
	case t == byteSizeType:
		d.byteSize(n, v, path)
	case t == stateKeysType && n.Kind == yaml.MappingNode:
		// One reference alone, as well as a list [new, old].
		var c Credential
		d.decode(n, reflect.ValueOf(&c).Elem(), path)
		v.Set(reflect.ValueOf(StateKeys{c}))
	case t.Kind() == reflect.Pointer:
		p := reflect.New(t.Elem())
		d.decode(n, p.Elem(), path)
		v.Set(p)
	case t.Kind() == reflect.Struct:
		d.structure(n, v, path)
	case t.Kind() == reflect.Map:
		d.mapping(n, v, path)
	case t.Kind() == reflect.Slice:
		d.sequence(n, v, path)
	case t.Kind() == reflect.String:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			d.fail(n, path, "expected a string, got %s%s", describe(n), quoteHint(n))
			return
		}
		v.SetString(n.Value)
	case t.Kind() == reflect.Bool:
		var b bool
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
			d.fail(n, path, "expected a boolean (true or false), got %s", describe(n))
			return
		}
		v.SetBool(b)
	case t.Kind() == reflect.Int:
		var i int64
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
			d.fail(n, path, "expected an integer, got %s", describe(n))
			return
		}
		if n.Decode(&i) != nil || i != int64(int(i)) {
			d.fail(n, path, "integer out of range")
			return
		}
		v.SetInt(i)
	case t.Kind() == reflect.Float64:
		var f float64
		if tag := n.ShortTag(); n.Kind != yaml.ScalarNode || tag != "!!int" && tag != "!!float" || n.Decode(&f) != nil {
			d.fail(n, path, "expected a number, got %s", describe(n))
			return
		}
		v.SetFloat(f)
	default:
		// Only the types of this package reach here; a new field type needs a case above.
		panic(fmt.Sprintf("configs: decode: unsupported type %s", t))
	}
}

// quoteHint suggests quoting a scalar YAML read as another type (`python: 3.12`).
func quoteHint(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return " (quote it if it is meant as text)"
	}
	return ""
}

func (d *decoder) byteSize(n *yaml.Node, v reflect.Value, path string) {
	const want = `expected a byte size (an integer, or a string like "512MiB")`
	if n.Kind != yaml.ScalarNode {
		d.fail(n, path, "%s, got %s", want, describe(n))
		return
	}
	var size ByteSize
	switch n.ShortTag() {
	case "!!int":
		var i int64
		if err := n.Decode(&i); err != nil {
			d.fail(n, path, "%v", errSizeOverflow)
			return
		}
		if i < 0 {
			d.fail(n, path, "%v", errNegativeSize)
			return
		}
		size = ByteSize(i)
	case "!!str", "!!float":
		s, err := ParseByteSize(n.Value)
		if err != nil {
			d.fail(n, path, "%v", err)
			return
		}
		size = s
	default:
		d.fail(n, path, "%s, got %s", want, describe(n))
		return
	}
	v.SetInt(int64(size))
}

func (d *decoder) key(k *yaml.Node, path string) (string, bool) {
	if k.Kind == yaml.AliasNode {
		k = k.Alias
	}
	switch {
	case k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge":
		d.fail(k, path, "merge keys (<<) are not supported; repeat the keys or use an alias for the whole value")
		return "", false
	case k.Kind != yaml.ScalarNode || isNull(k):
		d.fail(k, path, "a key must be a string, got %s", describe(k))
		return "", false
	}
	return k.Value, true
}

func (d *decoder) structure(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		if v.Type() == credentialType {
			d.fail(n, path, "expected a mapping {env: NAME} or {file: PATH}, got %s: a credential is a reference, never the secret itself", describe(n))
			return
		}
		d.fail(n, path, "expected a mapping, got %s", describe(n))
		return
	}
	fields := fieldsOf(v.Type())
	d.entries(n, path, func(name, child string, key, value *yaml.Node) {
		idx, ok := fields[name]
		if !ok {
			d.fail(key, child, "unknown key%s", suggest(name, fields))
			return
		}
		d.pos[child] = position{d.source, key.Line, key.Column}
		d.decode(value, v.Field(idx), child)
	})
}

// entries calls fn for each key of mapping n once, in order, having reported keys that are
// not strings and keys that repeat an earlier one.
func (d *decoder) entries(n *yaml.Node, path string, fn func(name, child string, key, value *yaml.Node)) {
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		name, ok := d.key(n.Content[i], path)
		if !ok {
			continue
		}
		child := keyPath(path, name)
		if line, dup := seen[name]; dup {
			d.fail(n.Content[i], child, "duplicate key (first at line %d)", line)
			continue
		}
		seen[name] = n.Content[i].Line
		fn(name, child, n.Content[i], n.Content[i+1])
	}
}

func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "expected a mapping, got %s", describe(n))
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMapWithSize(v.Type(), len(n.Content)/2))
	}
	d.entries(n, path, func(name, child string, key, value *yaml.Node) {
		d.pos[child] = position{d.source, key.Line, key.Column}
		elem := reflect.New(v.Type().Elem()).Elem()
		d.decode(value, elem, child)
		v.SetMapIndex(reflect.ValueOf(name), elem)
	})
}

func (d *decoder) sequence(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.SequenceNode {
		d.fail(n, path, "expected a sequence, got %s", describe(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		child := indexPath(path, i)
		d.pos[child] = position{d.source, item.Line, item.Column}
		d.decode(item, s.Index(i), child)
	}
	v.Set(s)
}

// fieldsOf maps the yaml key of each field of struct type t to the field's index.
func fieldsOf(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); name != "" && name != "-" {
			m[name] = i
		}
	}
	return m
}

// suggest offers the known key closest to a misspelt one.
func suggest(name string, fields map[string]int) string {
	best, ok := nearest.Name(name, slices.Sorted(maps.Keys(fields)))
	if !ok {
		return ""
	}
	return fmt.Sprintf("; did you mean %s?", best)
}

var yamlLineError = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^yaml: line (\d+): (.*)$`) })

// document parses data as exactly one YAML document whose top level is a mapping.
func document(data []byte, source string, into reflect.Type) (root *yaml.Node, ps Problems) {
	defer func() {
		// yaml.v3 panics on a few malformed inputs it should have reported; a config file
		// must never crash the server, so the panic becomes a problem.
		if r := recover(); r != nil {
			root, ps = nil, Problems{{Source: source, Message: fmt.Sprintf("YAML parser failed: %v", r)}}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	err := dec.Decode(&doc)
	switch {
	case errors.Is(err, io.EOF):
		return nil, Problems{{Source: source, Message: "empty document"}}
	case err != nil:
		return nil, Problems{syntaxProblem(err, data, source, fitOf(into))}
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		return nil, Problems{{Source: source, Line: extra.Line, Column: extra.Column, Message: "more than one YAML document; a config is exactly one"}}
	case !errors.Is(err, io.EOF):
		return nil, Problems{syntaxProblem(err, data, source, fitOf(into))}
	}
	if len(doc.Content) == 0 || isNull(doc.Content[0]) {
		return nil, Problems{{Source: source, Message: "empty document"}}
	}
	root = doc.Content[0]
	if root.Kind == yaml.AliasNode {
		root = root.Alias
	}
	if root.Kind != yaml.MappingNode {
		return nil, Problems{{Source: source, Line: root.Line, Column: root.Column, Message: "expected a mapping at the top level, got " + describe(root)}}
	}
	return root, nil
}

// syntaxProblem locates a YAML syntax error on the line where it is, and quotes that line.
// yaml.v3 names the line where the enclosing construct began (a mis-indented key deep in a
// mapping is reported at the mapping's first line), or no line at all; so the line is found
// here as the one after the longest prefix of whole lines that still parses, starting from the
// end: a construct left open on an earlier line (a flow mapping over several lines) does not
// mislead it, and the first line whose content no later line can repair does stop it.
func syntaxProblem(err error, data []byte, source string, fit func([]byte) int) Problem {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLineError().FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) <= maxLocatedLines {
		for k := len(lines) - 1; k >= 0; k-- {
			if parses(bytes.Join(lines[:k], nil)) {
				line = k + 1
				break
			}
		}
		if line > 0 && len(lines) <= maxBlamedLines && indentationError(msg) {
			line = misindented(lines, line, fit)
		}
	}
	p := Problem{Source: source, Line: line, Message: "invalid YAML: " + msg}
	if line > 0 && line <= len(lines) {
		p.Message += fmt.Sprintf("; line %d reads %q", line, quotable(string(lines[line-1])))
	}
	return p
}

// fitOf returns how many problems a document has when decoded as a value of type into (a
// document that does not parse, or holds no mapping, counts as many): how well a repair
// fits the schema, for misindented. A nil into gives a nil fit.
func fitOf(into reflect.Type) func([]byte) int {
	if into == nil {
		return nil
	}
	return func(data []byte) (n int) {
		defer func() {
			if recover() != nil {
				n = math.MaxInt
			}
		}()
		var doc yaml.Node
		if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
			return math.MaxInt
		}
		d := newDecoder("", map[string]position{})
		d.limit = fitNodes
		d.decode(doc.Content[0], reflect.New(into).Elem(), "")
		if d.nodes > fitNodes {
			return math.MaxInt
		}
		return len(d.ps)
	}
}

// indentationError reports whether a syntax error's message is one a line at the wrong
// indentation causes.
func indentationError(msg string) bool {
	for _, m := range []string{"did not find expected key", "mapping values are not allowed", "did not find expected '-' indicator", "did not find expected <document start>", "block end"} {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// misindented names the line an indentation error belongs to, given the line l (1-based)
// where the document stopped parsing. That is often not the culprit: the first key of a block
// sets the block's indentation, so when it is the one shifted, YAML objects only at its next
// sibling (one line late, or a whole block late for a shifted parent). So each content line
// from l back to where l's context began is tried at a neighbour's indentation, and the line
// whose re-indentation lets the document parse past l, and a few lines more, is the one
// named: first the one whose repaired document fits the schema best (fewest problems when
// decoded: a key moved under the wrong parent is an unknown key there), then one whose
// indentation is off the document's step (1 space where every other block steps by 2) and is
// put back on it, then l itself, then the nearest to l. When no single re-indentation helps,
// l stays.
func misindented(lines [][]byte, l int, fit func([]byte) int) int {
	const (
		lookBack  = 64 // content lines tried before l
		lookAhead = 3  // content lines after l that must parse too, when the rest never does
	)
	content := func(i int) bool {
		t := bytes.TrimSpace(lines[i])
		return len(t) > 0 && t[0] != '#'
	}
	indent := func(b []byte) int { return len(b) - len(bytes.TrimLeft(b, " ")) }
	step := indentStep(lines, content, indent)
	onStep := func(n int) bool { return step <= 1 || n%step == 0 }
	var cands []int // 0-based, nearest first, l itself first
	for i, n := l-1, 0; i >= 0 && n <= lookBack; i-- {
		if content(i) {
			cands = append(cands, i)
			n++
			if indent(lines[i]) == 0 && i < l-1 {
				break // a top-level key: the context of l began here
			}
		}
	}
	// Each candidate is tried at every indentation the context uses: a line is shifted off
	// its siblings', which are there.
	var levels []int
	for _, i := range cands {
		if n := indent(lines[i]); !slices.Contains(levels, n) {
			levels = append(levels, n)
		}
	}
	// blame tries each candidate against lines[:end]: the whole document first, which tells
	// a repair from a move of the error further down; only the next few lines when the
	// document has another error later.
	blame := func(end int) (int, bool) {
		best, bestScore, bestFit := l, -1, math.MaxInt
		for rank, i := range cands {
			own := indent(lines[i])
			for _, to := range levels {
				if to == own {
					continue
				}
				fixed := make([][]byte, end)
				copy(fixed, lines[:end])
				fixed[i] = append(bytes.Repeat([]byte(" "), to), bytes.TrimLeft(lines[i], " ")...)
				doc := bytes.Join(fixed, nil)
				if !parses(doc) {
					continue
				}
				score := 1
				if !onStep(own) && onStep(to) {
					score = 3 // it was off the document's step, and is put back on it
				} else if rank == 0 {
					score = 2
				}
				f := 0
				if fit != nil && end == len(lines) {
					f = fit(doc) // fewer schema problems: the repair the author meant
				}
				if f < bestFit || f == bestFit && score > bestScore {
					best, bestScore, bestFit = i+1, score, f
				}
			}
		}
		return best, bestScore >= 0
	}
	if best, ok := blame(len(lines)); ok {
		return best
	}
	end := l // lines[:end] holds l; then lookAhead more content lines
	for n := 0; end < len(lines) && n < lookAhead; end++ {
		if content(end) {
			n++
		}
	}
	best, _ := blame(end)
	return best
}

// indentStep is the indentation step the document keeps to: of 2, 3 and 4, the one most of
// its content lines are indented by a multiple of (the smaller on a tie), when at least three
// in four are; else 1, which judges no line off the step.
func indentStep(lines [][]byte, content func(int) bool, indent func([]byte) int) int {
	total := 0
	on := map[int]int{}
	for i := range lines {
		if !content(i) {
			continue
		}
		total++
		for _, s := range []int{2, 3, 4} {
			if indent(lines[i])%s == 0 {
				on[s]++
			}
		}
	}
	step := 1
	for _, s := range []int{2, 3, 4} {
		if on[s]*4 >= total*3 && (step == 1 || on[s] > on[step]) {
			step = s
		}
	}
	return step
}

// secretKey matches a key that names a credential, anywhere on a line (a flow mapping holds
// several): what follows it is never quoted.
var secretKey = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)[a-z_]*(?:token|bearer|secret|password|passwd|dsn)[a-z_]*["']?\s*:`)
})

// quotable is a line as a syntax error may quote it: without its line ending, at most 160
// bytes, and cut after the first key that names a credential.
func quotable(line string) string {
	line = strings.TrimRight(line, "\r\n")
	if loc := secretKey().FindStringIndex(line); loc != nil && strings.TrimSpace(line[loc[1]:]) != "" {
		return line[:loc[1]] + " …"
	}
	if len(line) > 160 {
		line = strings.ToValidUTF8(line[:160], "") + "…"
	}
	return line
}

// fitNodes bounds the decoding of one guess (fitOf), far below maxNodes: a guess at a typo
// is not worth a large document's aliases expanded hundreds of times.
const fitNodes = 1 << 14

// maxBlamedLines bounds the documents whose indentation errors misindented looks for (each
// guess costs a parse of the whole document).
const maxBlamedLines = 1000

// maxLocatedLines bounds the documents whose syntax errors syntaxProblem locates itself (each
// line costs a parse of what precedes it); a longer one keeps yaml.v3's line.
const maxLocatedLines = 2000

// parses reports whether data is a well-formed YAML stream (any number of documents).
func parses(data []byte) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		switch err := dec.Decode(&n); {
		case errors.Is(err, io.EOF):
			return true
		case err != nil:
			return false
		}
	}
}

// decodeConfig decodes a whole config file. It also refuses `sandbox:` beside
// profiles.default, since after folding only one could survive.
func decodeConfig(data []byte, source string) (*Config, *meta, Problems) {
	m := &meta{pos: map[string]position{"": {source, 0, 0}}}
	root, ps := document(data, source, reflect.TypeFor[Config]())
	if ps != nil {
		return nil, m, ps
	}
	c := new(Config)
	d := newDecoder(source, m.pos)
	d.decode(root, reflect.ValueOf(c).Elem(), "")
	if _, ok := c.Profiles[DefaultProfileName]; ok && c.Sandbox != nil {
		d.ps = append(d.ps, m.problem("sandbox", "conflicts with profiles.%s: the sandbox block is the profile named %q; keep one", DefaultProfileName, DefaultProfileName))
	}
	m.defaultFromSandbox = c.Sandbox != nil
	return c, m, d.ps
}

// decodeTenant decodes one tenants_dir file, which holds a tenant's block; key paths read
// as they would in the main file (tenants.<name>.…).
func decodeTenant(data []byte, source, name string, pos map[string]position) (Tenant, Problems) {
	path := keyPath("tenants", name)
	pos[path] = position{source, 1, 1}
	root, ps := document(data, source, reflect.TypeFor[Tenant]())
	if ps != nil {
		return Tenant{}, ps
	}
	var t Tenant
	d := newDecoder(source, pos)
	d.decode(root, reflect.ValueOf(&t).Elem(), path)
	return t, d.ps
}
