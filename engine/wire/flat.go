package wire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"sync"
)

// newFrame is an empty frame of type typ, or nil for a type this protocol does not have.
func newFrame(typ string) Frame {
	switch typ {
	case TypeHello:
		return &Hello{}
	case TypeCall:
		return &Call{}
	case TypeRead:
		return &Read{}
	case TypeDone:
		return &Done{}
	case TypeRun:
		return &Run{}
	case TypeAbort:
		return &Abort{}
	case TypeResult:
		return &Result{}
	}
	return nil
}

// maxFlatKeys is the most top-level keys decodeFlat takes; a frame with more goes the general
// way (no flat frame has as many).
const maxFlatKeys = 8

// decodeFlat is Decode's fast path (docs/design.md §19.7): one scan of line's top-level keys,
// checked against the frame's fields (each known, none twice), then the one json.Unmarshal,
// which checks that line is JSON. It takes a frame whose fields are all scalars or
// json.RawMessage, so no key below the top level is the frame's to check, or one whose
// structures hold nothing else (nestedKeys: a hello, a done), whose every object's keys
// scanObject checks as checkKeys would; and keys and a type with no escape in them, so the
// bytes are the names. It answers nil for anything else and
// for any error, and Decode then decodes the line the general way (decodeStrict), whose
// errors are the protocol's: this path never accepts a line that one refuses, nor says why.
func decodeFlat(line []byte, allowed []string) Frame {
	var keys [maxFlatKeys][]byte
	n, typ, ok := topKeys(line, &keys)
	if !ok || !slices.Contains(allowed, typ) {
		return nil
	}
	f := newFrame(typ)
	if f == nil {
		return nil
	}
	t := reflect.TypeOf(f).Elem()
	if fields := flatFields(t); fields != nil {
		for i, k := range keys[:n] {
			if _, ok := fields[string(k)]; !ok {
				return nil
			}
			for _, before := range keys[:i] {
				if bytes.Equal(before, k) {
					return nil
				}
			}
		}
	} else if !nestedKeys(t) {
		return nil
	} else if _, ok := scanObject(line, skipSpace(line, 0), t); !ok {
		// A frame with a structure of its own (a hello's probe, a done's error): every
		// object's keys are checked at its own depth (docs/design.md §19.11).
		return nil
	}
	if json.Unmarshal(line, f) != nil {
		return nil
	}
	return f
}

// flatFieldCache holds flatFields' answer per frame type: a frame's fields do not change, and
// this is asked on every frame decoded.
var flatFieldCache sync.Map // reflect.Type → map[string]reflect.Type, nil when not flat

// flatFields is frame type t's fields (jsonFields) when every one is flat (flatField), nil
// otherwise.
func flatFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := flatFieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := jsonFields(t)
	for _, ft := range m {
		if !flatField(ft) {
			m = nil
			break
		}
	}
	flatFieldCache.Store(t, m)
	return m
}

// flatField reports whether a field of type t holds nothing checkKeys would walk into: a
// scalar (or a pointer to one) or a free-form value.
func flatField(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessage {
		return true
	}
	switch t.Kind() {
	case reflect.Bool, reflect.String, reflect.Float32, reflect.Float64,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// nestedCache holds nestedKeys' answer per struct type.
var nestedCache sync.Map // reflect.Type → bool

// nestedKeys reports whether every field of struct type t, at every depth, is either a leaf
// (leafField: nothing below it whose keys checkKeys checks) or a struct of such fields: the
// frames scanObject checks whole.
func nestedKeys(t reflect.Type) bool {
	if v, ok := nestedCache.Load(t); ok {
		return v.(bool)
	}
	ok := nestedWithin(t, 4)
	nestedCache.Store(t, ok)
	return ok
}

func nestedWithin(t reflect.Type, depth int) bool {
	if depth == 0 || t.Kind() != reflect.Struct {
		return false
	}
	for _, ft := range jsonFields(t) {
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if !leafField(ft) && !nestedWithin(ft, depth-1) {
			return false
		}
	}
	return true
}

// leafField reports whether a field of type t holds no key checkKeys checks at any depth: a
// flat field, or a slice, array or map of leaves (a map's own keys are free-form).
func leafField(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if flatField(t) {
		return true
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map:
		return leafField(t.Elem())
	}
	return false
}

// maxNestedKeys is the most keys scanObject takes in one object; an object with more goes the
// general way (a probe has 24 fields).
const maxNestedKeys = 32

// scanObject scans the object at line[i] as checkKeys walks it for struct type t (nestedKeys):
// each key plain (no escape, no control byte), one of t's fields exactly and not repeated, a
// struct field's object scanned the same way, every other value skipped. It answers the index
// after the object, and ok false for a key refused and for anything it does not follow (a
// struct field given an array, more keys than it holds): json.Unmarshal checks the rest.
func scanObject(line []byte, i int, t reflect.Type) (int, bool) {
	if i >= len(line) || line[i] != '{' {
		return 0, false
	}
	fields := jsonFields(t)
	var seen [maxNestedKeys][]byte
	n := 0
	if i = skipSpace(line, i+1); i < len(line) && line[i] == '}' {
		return i + 1, true
	}
	for {
		k, j, plain := plainString(line, skipSpace(line, i))
		if !plain || n == len(seen) {
			return 0, false
		}
		ft, known := fields[string(k)]
		if !known {
			return 0, false
		}
		for _, before := range seen[:n] {
			if bytes.Equal(before, k) {
				return 0, false
			}
		}
		seen[n], n = k, n+1
		if i = skipSpace(line, j); i >= len(line) || line[i] != ':' {
			return 0, false
		}
		i = skipSpace(line, i+1)
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		ok := false
		switch {
		case leafField(ft):
			i, ok = skipValue(line, i)
		case i < len(line) && line[i] == '{':
			i, ok = scanObject(line, i, ft)
		case i < len(line) && line[i] == '[':
			// checkKeys would walk each element as the struct; left to it.
		default:
			i, ok = skipValue(line, i) // null, or a scalar json.Unmarshal refuses
		}
		if !ok {
			return 0, false
		}
		if i = skipSpace(line, i); i >= len(line) {
			return 0, false
		}
		switch line[i] {
		case ',':
			i++
		case '}':
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// topKeys scans line as one JSON object, trusting it to be JSON (json.Unmarshal checks that
// after), into its top-level keys (n of keys) and the string its "type" key holds. ok is false
// for whatever it does not follow: not an object, a key or the type with an escape or a
// control byte, more keys than keys holds, no "type", a line that ends inside the object.
func topKeys(line []byte, keys *[maxFlatKeys][]byte) (n int, typ string, ok bool) {
	i := skipSpace(line, 0)
	if i >= len(line) || line[i] != '{' {
		return 0, "", false
	}
	i++
	for {
		k, j, plain := plainString(line, skipSpace(line, i))
		if !plain || n == len(keys) {
			return 0, "", false
		}
		keys[n], n = k, n+1
		if i = skipSpace(line, j); i >= len(line) || line[i] != ':' {
			return 0, "", false
		}
		i = skipSpace(line, i+1)
		if string(k) == "type" {
			v, j, plain := plainString(line, i)
			if !plain {
				return 0, "", false
			}
			typ, i = string(v), j
		} else if i, ok = skipValue(line, i); !ok {
			return 0, "", false
		}
		if i = skipSpace(line, i); i >= len(line) {
			return 0, "", false
		}
		switch line[i] {
		case ',':
			i++
		case '}':
			return n, typ, typ != ""
		default:
			return 0, "", false
		}
	}
}

func skipSpace(line []byte, i int) int {
	for i < len(line) && (line[i] == ' ' || line[i] == '\t' || line[i] == '\n' || line[i] == '\r') {
		i++
	}
	return i
}

// plainString is the string starting at line[i] without its quotes, and the index after it;
// plain is false unless there is one there with no escape and no control byte in it.
func plainString(line []byte, i int) (s []byte, next int, plain bool) {
	if i >= len(line) || line[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(line); j++ {
		switch c := line[j]; {
		case c == '"':
			return line[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// skipValue is the index after the JSON value starting at line[i]: a string (escapes
// followed), an object or array (its strings followed, its brackets counted) or a scalar.
func skipValue(line []byte, i int) (int, bool) {
	if i >= len(line) {
		return 0, false
	}
	depth := 0
	for j := i; j < len(line); j++ {
		switch line[j] {
		case '"':
			k, ok := skipString(line, j)
			if !ok {
				return 0, false
			}
			if depth == 0 {
				return k, true
			}
			j = k - 1
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return j, true // a scalar's end: the enclosing object's
			}
			if depth--; depth == 0 {
				return j + 1, true
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return j, true
			}
		}
	}
	return 0, false
}

// skipString is the index after the string starting at line[i], its escapes followed.
func skipString(line []byte, i int) (int, bool) {
	for j := i + 1; j < len(line); j++ {
		switch line[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}
