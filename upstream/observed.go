package upstream

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/toolshape"
)

// ObservedAfter is how many results of a tool without an output schema it takes before their
// shape becomes the tool's observed return type (get_tool_info's output_type and the return
// type of its python_stub). From then on a result that does not fit is reported as drift.
const ObservedAfter = 3

// Bounds on what is learned (docs/design.md §3.3): a shape keeps the JSON types, object keys
// and array element shapes of results, never a value.
const (
	// observeMaxBytes: a larger result is not read for its shape (nor counted as a sample).
	observeMaxBytes = 1 << 20
	// shapeDepth: values nested deeper are Any.
	shapeDepth = toolshape.StubDepth
	// shapeKeys: an object with more keys than this (over all its samples), or a key longer
	// than shapeKeyBytes, is a map (dict[str, V]): its keys are data, and are not kept.
	shapeKeys     = 64
	shapeKeyBytes = 64
	// shapeNodes bounds one tool's shape; a part that would pass it is Any.
	shapeNodes = 256
	// maxObserved bounds the tools one tenant's Pool learns about; the one observed least
	// recently is forgotten first.
	maxObserved = 256
	// maxDrift is how many drift reports a tool keeps (the latest).
	maxDrift = 3
)

// OutputType says where a tool's return type comes from: its declared outputSchema
// ("declared"), the shape of the results seen ("observed", after ObservedAfter of them), or
// nowhere yet ("none"). Samples counts the results seen (of a tool without an output schema);
// Drift says, for the latest results that did not fit the observed type, how they differed
// (the type was widened to take them).
type OutputType struct {
	Source  string   `json:"source"`
	Samples int      `json:"samples"`
	Drift   []string `json:"drift"`
}

// Output type sources.
const (
	OutputDeclared = "declared"
	OutputObserved = "observed"
	OutputNone     = "none"
)

// kinds is a set of JSON types.
type kinds uint8

const (
	kNull kinds = 1 << iota
	kBool
	kInt
	kFloat
	kString
	kArray
	kObject
)

// shape is what is known of the values seen at one place in a tool's results.
type shape struct {
	kinds kinds
	// any: not followed (too deep, too large); anything fits.
	any bool
	// items is the shape of array elements; nil until an element was seen.
	items *shape
	// fields are an object's keys, first seen first; objects counts the objects seen here,
	// so a key seen in all of them is required.
	fields  []*field
	objects int
	// dict, when set, makes the objects here maps: the shape of their values (keys not kept).
	dict *shape
	// size counts the nodes of this shape, itself included.
	size int
}

type field struct {
	name  string
	shape *shape
	seen  int
}

func (s *shape) field(name string) *field {
	for _, f := range s.fields {
		if f.name == name {
			return f
		}
	}
	return nil
}

func (s *shape) nodes() int {
	if s == nil {
		return 0
	}
	return s.size
}

// resize recounts s's nodes from its children's counts, and returns s.
func (s *shape) resize() *shape {
	s.size = 1 + s.items.nodes() + s.dict.nodes()
	for _, f := range s.fields {
		s.size += f.shape.nodes()
	}
	return s
}

func leaf(k kinds) *shape { return &shape{kinds: k, size: 1} }

func anyShape() *shape { return &shape{any: true, size: 1} }

// sampleOf reads the shape of one JSON value; ok is false when v is not JSON.
func sampleOf(v []byte) (_ *shape, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	b := &sampler{dec: dec}
	s, err := b.value(0)
	if err != nil {
		return nil, false
	}
	return s, true
}

type sampler struct {
	dec *json.Decoder
}

// skipValue reads one value without following it.
func (b *sampler) skipValue() error {
	tok, err := b.dec.Token()
	if d, ok := tok.(json.Delim); ok && err == nil {
		return b.skip(d)
	}
	return err
}

func (b *sampler) value(depth int) (*shape, error) {
	tok, err := b.dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); ok && depth >= shapeDepth {
		return anyShape(), b.skip(d)
	}
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			s := &shape{kinds: kArray}
			for b.dec.More() {
				e, err := b.value(depth + 1)
				if err != nil {
					return nil, err
				}
				s.items = fold(s.items, e, "", nil)
				if s.items.size > shapeNodes {
					s.items = bounded(s.items, shapeNodes)
				}
			}
			_, err := b.dec.Token()
			return s.resize(), err
		}
		s := &shape{kinds: kObject, objects: 1}
		for b.dec.More() {
			k, err := b.dec.Token()
			if err != nil {
				return nil, err
			}
			key, _ := k.(string)
			var e *shape
			if s.size > shapeNodes {
				// Past the bound: the key is kept, its value not followed.
				e = anyShape()
				if err := b.skipValue(); err != nil {
					return nil, err
				}
			} else if e, err = b.value(depth + 1); err != nil {
				return nil, err
			}
			s.addKey(key, e)
		}
		_, err := b.dec.Token()
		return s.resize(), err
	case nil:
		return leaf(kNull), nil
	case bool:
		return leaf(kBool), nil
	case json.Number:
		if strings.ContainsAny(v.String(), ".eE") {
			return leaf(kFloat), nil
		}
		return leaf(kInt), nil
	case string:
		return leaf(kString), nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// skip reads the rest of the array or object d opened.
func (b *sampler) skip(d json.Delim) error {
	for depth := 1; depth > 0; {
		tok, err := b.dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '[' || d == '{' {
				depth++
			} else {
				depth--
			}
		}
	}
	return nil
}

// addKey adds one key of one object to s (an object's shape while it is being read).
func (s *shape) addKey(key string, v *shape) {
	defer s.resize()
	if s.dict != nil {
		s.dict = fold(s.dict, v, "", nil)
		return
	}
	if f := s.field(key); f != nil {
		f.shape = fold(f.shape, v, "", nil) // a repeated key
		return
	}
	s.fields = append(s.fields, &field{name: key, shape: v, seen: 1})
	if len(key) > shapeKeyBytes || len(s.fields) > shapeKeys {
		s.toDict()
	}
}

// toDict makes s's objects maps: their values' shapes folded into one, the keys dropped.
func (s *shape) toDict() {
	for _, f := range s.fields {
		s.dict = fold(s.dict, f.shape, "", nil)
	}
	if s.dict == nil {
		s.dict = anyShape()
	}
	s.fields = nil
	s.resize()
}

// drifts collects how a sample differs from an established shape.
type drifts struct {
	lines []string
	more  int
}

func (d *drifts) add(format string, args ...any) {
	if d == nil {
		return
	}
	if len(d.lines) >= 3 {
		d.more++
		return
	}
	d.lines = append(d.lines, toolshape.Clip(fmt.Sprintf(format, args...), 200))
}

// fold merges sample s into a (in place when a is not nil) and returns the result. When d is
// not nil, a is established, and each way s does not fit it is added to d, named by path.
func fold(a, s *shape, path string, d *drifts) *shape {
	switch {
	case s == nil:
		return a
	case a == nil:
		return s
	case a.any:
		return a
	case s.any:
		a.any, a.kinds, a.items, a.fields, a.dict = true, 0, nil, nil, nil
		return a.resize()
	}
	defer a.resize()
	if added := s.kinds &^ a.kinds; added != 0 && !(added == kInt && a.kinds&kFloat != 0) {
		d.add("%s: %s, where earlier results had %s", path, kindsText(added), kindsText(a.kinds))
	}
	had := a.kinds
	a.kinds |= s.kinds
	if s.kinds&kArray != 0 {
		a.items = fold(a.items, s.items, path+"[]", d)
	}
	if s.kinds&kObject == 0 {
		return a
	}
	if had&kObject == 0 {
		d = nil // the new kind was the drift; its keys are not news
	}
	if a.dict != nil || s.dict != nil {
		if a.dict == nil {
			a.toDict()
		}
		v := s.dict
		if v == nil {
			tmp := &shape{fields: s.fields}
			tmp.toDict()
			v = tmp.dict
		}
		a.dict = fold(a.dict, v, path+"[…]", d)
		a.objects += s.objects
		return a
	}
	for _, f := range a.fields {
		if f.seen == a.objects && a.objects > 0 {
			if sf := s.field(f.name); sf == nil || sf.seen < s.objects {
				d.add("%s is missing, where every earlier result had it", shapePath(path, f.name))
			}
		}
	}
	for _, sf := range s.fields {
		if f := a.field(sf.name); f != nil {
			f.shape = fold(f.shape, sf.shape, shapePath(path, sf.name), d)
			f.seen += sf.seen
			continue
		}
		if a.objects > 0 {
			d.add("%s is a new key", shapePath(path, sf.name))
		}
		a.fields = append(a.fields, sf)
	}
	a.objects += s.objects
	if len(a.fields) > shapeKeys {
		a.toDict()
	}
	return a
}

func shapePath(path, key string) string {
	if toolshape.Aliasable(key) && len(key) <= shapeKeyBytes {
		return path + "." + key
	}
	return path + "[" + toolshape.PythonString(toolshape.Clip(key, shapeKeyBytes)) + "]"
}

// kindsText names a set of JSON types as Python does.
func kindsText(k kinds) string {
	var out []string
	for _, n := range []struct {
		k    kinds
		name string
	}{{kObject, "dict"}, {kArray, "list"}, {kString, "str"}, {kInt, "int"}, {kFloat, "float"}, {kBool, "bool"}, {kNull, "None"}} {
		if k&n.k != 0 {
			out = append(out, n.name)
		}
	}
	return strings.Join(out, " | ")
}

// schema renders s as a JSON Schema (the keys in the order first seen), which the stub
// renders like a declared one.
func (s *shape) schema(b *bytes.Buffer) {
	if s == nil || s.any || s.kinds == 0 {
		b.WriteString("{}")
		return
	}
	var types []string
	for _, n := range []struct {
		k    kinds
		name string
	}{{kObject, "object"}, {kArray, "array"}, {kString, "string"}, {kInt, "integer"}, {kFloat, "number"}, {kBool, "boolean"}, {kNull, "null"}} {
		if s.kinds&n.k != 0 && !(n.k == kInt && s.kinds&kFloat != 0) {
			types = append(types, strconv.Quote(n.name))
		}
	}
	b.WriteString(`{"type":[` + strings.Join(types, ",") + `]`)
	if s.kinds&kArray != 0 && s.items != nil {
		b.WriteString(`,"items":`)
		s.items.schema(b)
	}
	if s.kinds&kObject != 0 {
		if s.dict != nil {
			b.WriteString(`,"additionalProperties":`)
			s.dict.schema(b)
		} else if len(s.fields) > 0 {
			b.WriteString(`,"properties":{`)
			var req []string
			for i, f := range s.fields {
				if i > 0 {
					b.WriteByte(',')
				}
				k, _ := json.Marshal(f.name)
				b.Write(k)
				b.WriteByte(':')
				f.shape.schema(b)
				if f.seen == s.objects {
					req = append(req, string(k))
				}
			}
			b.WriteString(`},"required":[` + strings.Join(req, ",") + `]`)
		}
	}
	b.WriteByte('}')
}

// observations are what one Pool (one tenant) learned of its tools' results: never shared
// with another Pool. Without a store they are kept in memory only; with one (the tenant's
// ledger records, observedstore.go) tools is its cache, and the samples are merged into the
// store too. mu is a leaf lock.
type observations struct {
	mu    sync.Mutex
	clock uint64
	tools map[string]*observed // by toolKey

	// The store's side (observedstore.go); store is nil without one. pending are samples not
	// yet merged into it, in order; mu guards them.
	store   ShapeStore
	log     *slog.Logger // hears the store's failures
	pending []pendingSample
	wake    chan struct{} // one slot: there are pending samples
	stop    chan struct{} // closed by Pool.Close: the flusher merges what is pending and returns
	stopped chan struct{} // closed by the flusher as it returns
	turn    chan struct{} // one slot: held while pending samples are merged into the store
	pause   time.Duration // the flusher's pause after a merge; flushPause when zero (tests set it)
}

type observed struct {
	shape   *shape
	samples int
	drift   []string
	used    uint64 // clock of the last sample
}

// toolKey names what a tool's observations belong to: the server, the tool and its definition
// as listed, so a changed definition starts afresh.
func toolKey(t *Tool) string { return t.Name + "\x00" + t.digest }

// defDigest is the sha256 of a tool's definition as admitted.
func defDigest(def any) string {
	b, _ := json.Marshal(def)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// observe learns the shape of v, a result of tool (one without an output schema).
func (o *observations) observe(t *Tool, v []byte) {
	if o == nil || t.Def == nil || t.Def.OutputSchema != nil || len(v) > observeMaxBytes {
		return
	}
	s, ok := sampleOf(v)
	if !ok {
		return
	}
	var kept *shape
	if o.store != nil {
		kept = s.clone() // s itself is folded into the cache, and changes there
	}
	key := toolKey(t)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.tools == nil {
		o.tools = map[string]*observed{}
	}
	o.clock++
	e := o.tools[key]
	if e == nil {
		if len(o.tools) >= maxObserved {
			o.evict()
		}
		e = &observed{}
		o.tools[key] = e
	}
	e.used = o.clock
	e.add(s, 1)
	if kept != nil {
		o.queue(t, kept)
	}
}

// add folds sample s, standing for n results, into e; once e's type is observed, the ways s
// does not fit it are drift.
func (e *observed) add(s *shape, n int) {
	e.samples += n
	var d *drifts
	if e.samples-n >= ObservedAfter {
		d = &drifts{}
	}
	e.shape = fold(e.shape, s, "result", d)
	if e.shape.size > shapeNodes {
		e.shape = bounded(e.shape, shapeNodes)
	}
	if d != nil && len(d.lines) > 0 {
		line := fmt.Sprintf("result %d: %s", e.samples, strings.Join(d.lines, "; "))
		if d.more > 0 {
			line += fmt.Sprintf("; and %d more", d.more)
		}
		e.drift = append(e.drift, line)
		if len(e.drift) > maxDrift {
			e.drift = e.drift[len(e.drift)-maxDrift:]
		}
	}
}

// bounded returns s cut to at most n nodes, first come first kept: a node whose children do
// not all fit becomes Any.
func bounded(s *shape, n int) *shape {
	budget := n - 1 // the root is paid for
	var cut func(s *shape) *shape
	cut = func(s *shape) *shape {
		need := len(s.fields)
		if s.items != nil {
			need++
		}
		if s.dict != nil {
			need++
		}
		if need > budget {
			return anyShape()
		}
		budget -= need // every child is paid for before any is followed
		c := *s
		if s.items != nil {
			c.items = cut(s.items)
		}
		if s.dict != nil {
			c.dict = cut(s.dict)
		}
		c.fields = nil
		for _, f := range s.fields {
			c.fields = append(c.fields, &field{name: f.name, shape: cut(f.shape), seen: f.seen})
		}
		return c.resize()
	}
	return cut(s)
}

// evict forgets the tool observed least recently. o.mu is held.
func (o *observations) evict() {
	var oldest string
	var at uint64
	for k, e := range o.tools {
		if oldest == "" || e.used < at {
			oldest, at = k, e.used
		}
	}
	delete(o.tools, oldest)
}

// outputType says what is known of tool's return type, and the observed type as a JSON
// Schema when it is known. With a store, what is pending is merged into it first, and what
// it keeps (every replica's samples) refreshes the cache.
func (o *observations) outputType(ctx context.Context, t *Tool) (OutputType, []byte) {
	if t.Def != nil && t.Def.OutputSchema != nil {
		return OutputType{Source: OutputDeclared, Drift: []string{}}, nil
	}
	ot := OutputType{Source: OutputNone, Drift: []string{}}
	if o == nil {
		return ot, nil
	}
	o.refresh(ctx, t)
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.tools[toolKey(t)]
	if e == nil {
		return ot, nil
	}
	ot.Samples = e.samples
	if e.samples < ObservedAfter {
		return ot, nil
	}
	ot.Source = OutputObserved
	ot.Drift = append(ot.Drift, e.drift...)
	var b bytes.Buffer
	e.shape.schema(&b)
	return ot, b.Bytes()
}
