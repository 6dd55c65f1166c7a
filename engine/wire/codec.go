package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// DefaultMaxFrame is the ceiling on one frame from the child when the host states none.
const DefaultMaxFrame = 8 << 20

// ErrFrameTooLarge is returned when a frame crosses the ceiling before its newline.
var ErrFrameTooLarge = errors.New("frame exceeds the size ceiling")

// Violation is a frame that broke the protocol. Its message is safe to show a model.
type Violation struct{ Reason string }

func (v *Violation) Error() string { return "protocol violation: " + v.Reason }

func violation(format string, args ...any) error {
	return &Violation{Reason: fmt.Sprintf(format, args...)}
}

// Reader reads frames of at most max bytes each. The bound is applied to bytes as they
// arrive: an endless line costs at most max bytes before it is refused. Lines are taken from
// the buffer by moving an offset, never by shifting what follows them, so a burst of tiny
// lines costs time in proportion to its size.
type Reader struct {
	r     io.Reader
	max   int
	buf   []byte // received bytes; buf[start:] is not yet returned
	start int
	tmp   []byte
}

// NewReader returns a Reader over r. max ≤ 0 means DefaultMaxFrame.
func NewReader(r io.Reader, max int) *Reader {
	if max <= 0 {
		max = DefaultMaxFrame
	}
	return &Reader{r: r, max: max, tmp: make([]byte, 64<<10)}
}

// ReadLine returns the next newline-terminated line without its newline. It returns io.EOF at
// a clean end, io.ErrUnexpectedEOF when the stream ends mid-line, and ErrFrameTooLarge when a
// line crosses the ceiling.
func (r *Reader) ReadLine() ([]byte, error) {
	scanned := r.start
	for {
		if i := bytes.IndexByte(r.buf[scanned:], '\n'); i >= 0 {
			end := scanned + i
			if end-r.start > r.max {
				return nil, ErrFrameTooLarge
			}
			// Copy out, so a returned line never aliases the buffer later reads reuse.
			line := append([]byte(nil), r.buf[r.start:end]...)
			r.start = end + 1
			return line, nil
		}
		if len(r.buf)-r.start > r.max {
			return nil, ErrFrameTooLarge
		}
		// Keep only the partial line before reading more (once: after that it starts at 0).
		if r.start > 0 {
			n := copy(r.buf, r.buf[r.start:])
			r.buf, r.start = r.buf[:n], 0
		}
		scanned = len(r.buf)
		m, err := r.r.Read(r.tmp)
		r.buf = append(r.buf, r.tmp[:m]...)
		if err != nil && m == 0 {
			if errors.Is(err, io.EOF) {
				if len(r.buf) == 0 {
					return nil, io.EOF
				}
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}

// ReadFrame reads and strictly decodes the next frame, accepting only the given types.
func (r *Reader) ReadFrame(allowed ...string) (Frame, error) {
	line, err := r.ReadLine()
	if err != nil {
		if errors.Is(err, ErrFrameTooLarge) {
			return nil, violation("a frame exceeded %d bytes", r.max)
		}
		return nil, err
	}
	return Decode(line, allowed...)
}

// Decode strictly decodes one frame: it must be a JSON object whose "type" is one of allowed,
// whose keys match the frame's fields exactly (case included), with no unknown or repeated
// key at any depth of a typed structure.
//
// A frame whose fields are all scalars or free-form values (a binding call's, the frame every
// call costs) takes a fast path first (decodeFlat); anything it does not take whole is decoded
// here as ever, so every error reads the same either way.
func Decode(line []byte, allowed ...string) (Frame, error) {
	if f := decodeFlat(line, allowed); f != nil {
		return f, nil
	}
	return decodeStrict(line, allowed)
}

// decodeStrict is Decode's general path: the type from a first parse, the keys walked by
// json.Decoder's tokens (checkKeys), then the decoding itself.
func decodeStrict(line []byte, allowed []string) (Frame, error) {
	var head struct {
		Type json.RawMessage `json:"type"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return nil, violation("a frame is not a JSON object: %v", err)
	}
	var typ string
	if err := json.Unmarshal(head.Type, &typ); err != nil {
		return nil, violation("a frame has no string \"type\"")
	}
	f := newFrame(typ)
	if f == nil {
		return nil, violation("unknown frame type %q", truncate(typ))
	}
	if !slices.Contains(allowed, typ) {
		return nil, violation("a %q frame is not allowed here", typ)
	}
	if err := Unmarshal(line, f); err != nil {
		return nil, violation("%s frame: %v", typ, err)
	}
	return f, nil
}

// Unmarshal decodes one JSON object into v, a pointer to a struct, by this package's rules:
// keys match the fields' json names exactly (case included), and an unknown or repeated key
// at any depth of a typed structure is an error. Protocols built on these frames' rules (the
// remote sandbox protocol) decode with it too.
func Unmarshal(data []byte, v any) error {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("wire: Unmarshal needs a pointer to a struct, got %T", v)
	}
	if trimmed := bytes.TrimSpace(data); len(trimmed) == 0 || trimmed[0] != '{' {
		return errors.New("not a JSON object")
	}
	if err := checkKeys(data, t.Elem()); err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// checkKeys walks data alongside t and rejects keys that are not exactly a field's json name,
// and repeated keys. Fields of type json.RawMessage hold free-form values and are not walked.
func checkKeys(data []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := walk(dec, t, ""); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the frame")
	}
	return nil
}

var rawMessage = reflect.TypeOf(json.RawMessage(nil))

func walk(dec *json.Decoder, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessage {
		// A free-form value: the decoder scans it in one go, without a token per element.
		var raw json.RawMessage
		return dec.Decode(&raw)
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		if t.Kind() == reflect.Map {
			for dec.More() {
				if _, err := dec.Token(); err != nil {
					return err
				}
				if err := walk(dec, t.Elem(), path); err != nil {
					return err
				}
			}
			_, err := dec.Token()
			return err
		}
		if t.Kind() != reflect.Struct {
			return fmt.Errorf("%s: unexpected object", pathOr(path))
		}
		fields := jsonFields(t)
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			key := kt.(string)
			ft, ok := fields[key]
			if !ok {
				return fmt.Errorf("unknown key %q", truncate(path+key))
			}
			if seen[key] {
				return fmt.Errorf("repeated key %q", path+key)
			}
			seen[key] = true
			if err := walk(dec, ft, path+key+"."); err != nil {
				return err
			}
		}
		_, err := dec.Token()
		return err
	case json.Delim('['):
		elem := t
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			elem = t.Elem()
		}
		for dec.More() {
			if err := walk(dec, elem, path); err != nil {
				return err
			}
		}
		_, err := dec.Token()
		return err
	}
	return nil
}

func pathOr(p string) string {
	if p == "" {
		return "frame"
	}
	return strings.TrimSuffix(p, ".")
}

var fieldCache sync.Map // reflect.Type → map[string]reflect.Type

func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			// An embedded struct's fields are the outer object's keys, as encoding/json
			// reads them.
			for k, ft := range jsonFields(f.Type) {
				if _, ok := m[k]; !ok {
					m[k] = ft
				}
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
	fieldCache.Store(t, m)
	return m
}

// Writer writes frames, one JSON line each. Concurrent WriteFrame calls are serialized.
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewWriter returns a Writer over w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// WriteFrame encodes f, filling in its type, and writes it with a trailing newline.
func (w *Writer) WriteFrame(f Frame) error {
	setType(f)
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err = w.w.Write(b)
	return err
}

func setType(f Frame) {
	switch v := f.(type) {
	case *Hello:
		v.Type = TypeHello
	case *Call:
		v.Type = TypeCall
	case *Read:
		v.Type = TypeRead
	case *Done:
		v.Type = TypeDone
	case *Run:
		v.Type = TypeRun
	case *Abort:
		v.Type = TypeAbort
	case *Result:
		v.Type = TypeResult
	}
}
