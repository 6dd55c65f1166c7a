package remote

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"runtime"

	"github.com/mcp-sandbox/mcp-sandbox/engine/wire"
)

// Bounds is what a client accepts from one stream. Each is applied to bytes as they arrive,
// never to assembled lines: an endless line costs at most MaxFrame bytes before it is refused.
type Bounds struct {
	// MaxFrame bounds one line (default DefaultMaxFrame).
	MaxFrame int
	// MaxStream bounds the whole stream in bytes (default DefaultMaxStream).
	MaxStream int64
	// MaxLines bounds the lines of a stream, empty ones included (default DefaultMaxLines).
	MaxLines int
	// MaxEmptyLines bounds the empty lines of a stream (default DefaultMaxEmptyLines).
	MaxEmptyLines int
}

// The default bounds. One frame carries at most a child's frame (a call's arguments, the
// program's value and traceback) and some envelope; a stream carries the output streams
// and artifacts as base64, the calls, and a heartbeat a second.
const (
	DefaultMaxFrame      = 8<<20 + 256<<10
	DefaultMaxStream     = 256 << 20
	DefaultMaxLines      = 1 << 18
	DefaultMaxEmptyLines = 1024
)

func (b Bounds) withDefaults() Bounds {
	if b.MaxFrame <= 0 {
		b.MaxFrame = DefaultMaxFrame
	}
	if b.MaxStream <= 0 {
		b.MaxStream = DefaultMaxStream
	}
	if b.MaxLines <= 0 {
		b.MaxLines = DefaultMaxLines
	}
	if b.MaxEmptyLines <= 0 {
		b.MaxEmptyLines = DefaultMaxEmptyLines
	}
	return b
}

// yieldEvery is how many lines the reader takes before it hands the processor back: parsing
// is synchronous, and a reader that never yields would starve the timers meant to end a
// hostile stream.
const yieldEvery = 256

// readChunk is how much the reader asks the network for at a time.
const readChunk = 64 << 10

// violation is a stream that broke the protocol or crossed a bound, as opposed to a
// connection that failed.
type violation struct{ msg string }

func (v *violation) Error() string { return v.msg }

func violationf(format string, args ...any) error {
	return &violation{fmt.Sprintf(format, args...)}
}

// frameReader splits a stream into lines within Bounds. A line it returns aliases its buffer
// and is valid until the next call. It belongs to one goroutine.
type frameReader struct {
	r          io.Reader
	b          Bounds
	buf        []byte // buf[start:end] is received and not yet returned
	start, end int
	total      int64
	lines      int
	empty      int
}

func newFrameReader(r io.Reader, b Bounds) *frameReader {
	return &frameReader{r: r, b: b.withDefaults()}
}

// next returns the next non-empty line without its newline (a trailing "\r" is kept and makes
// the frame malformed). It returns io.EOF at a clean end, io.ErrUnexpectedEOF when the stream
// ends inside a line, and an error naming the bound a stream crossed.
func (r *frameReader) next() ([]byte, error) {
	scanned := r.start
	for {
		if i := bytes.IndexByte(r.buf[scanned:r.end], '\n'); i >= 0 {
			nl := scanned + i
			line := r.buf[r.start:nl]
			r.start = nl + 1
			scanned = r.start
			if r.lines++; r.lines > r.b.MaxLines {
				return nil, violationf("the stream passed %d lines", r.b.MaxLines)
			}
			if r.lines%yieldEvery == 0 {
				runtime.Gosched()
			}
			if len(line) > r.b.MaxFrame {
				return nil, violationf("a frame passed %d bytes", r.b.MaxFrame)
			}
			if len(line) == 0 {
				if r.empty++; r.empty > r.b.MaxEmptyLines {
					return nil, violationf("the stream passed %d empty lines", r.b.MaxEmptyLines)
				}
				continue
			}
			return line, nil
		}
		if r.end-r.start > r.b.MaxFrame {
			return nil, violationf("a frame passed %d bytes", r.b.MaxFrame)
		}
		if r.start > 0 {
			// Keep only the partial line; each byte is moved at most once.
			n := copy(r.buf, r.buf[r.start:r.end])
			r.start, r.end = 0, n
		}
		scanned = r.end
		if len(r.buf)-r.end < readChunk/4 {
			// Room for the longest frame and one more read, reached in steps of four, so a
			// stream of long frames allocates little more than the ceiling in all.
			size := min(max(4*len(r.buf), readChunk), r.b.MaxFrame+1+readChunk)
			if size > len(r.buf) {
				grown := make([]byte, size)
				copy(grown, r.buf[:r.end])
				r.buf = grown
			}
		}
		want := min(len(r.buf)-r.end, readChunk)
		if left := r.b.MaxStream - r.total; int64(want) > left+1 {
			want = int(left + 1)
		}
		n, err := r.r.Read(r.buf[r.end : r.end+want])
		r.end += n
		if r.total += int64(n); r.total > r.b.MaxStream {
			return nil, violationf("the stream passed %d bytes", r.b.MaxStream)
		}
		if err != nil && n == 0 {
			if errors.Is(err, io.EOF) {
				if r.end == r.start {
					return nil, io.EOF
				}
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}

// stream is the order of a stream's frames and what its data frames carry. Its frame method
// is the whole client-side grammar:
//
//	stream = error | accepted { progress | call | read } { data } result
//
// It belongs to the goroutine that reads the stream until result or an error, and is read
// by the execution only after that.
type stream struct {
	maxOutput    int64 // per output stream: bytes past it are counted, and dropped but for a tail
	preview      int   // the tail kept of an output stream past maxOutput, for its preview
	maxArtifacts int64 // all artifacts together: an artifact that does not fit is dropped whole
	scratch      []byte
	secret       string // the credential, scrubbed from what a violation quotes

	phase     int // 0: before accepted, 1: running, 2: data, 3: ended
	execution string
	lastID    int64

	stdout, stderr sink
	artifacts      map[int]*sink
	artifactBytes  int64 // kept
}

// sink is what one stream's data frames delivered.
type sink struct {
	kept    []byte
	n       int64 // bytes received, kept or not
	dropped bool  // some were not kept
	// last is, for an output stream that went past its ceiling, the last preview bytes
	// received (kept or not): with kept, what its preview is made from.
	last []byte
}

// newStream returns the grammar of one stream that keeps maxOutput bytes of each output
// stream (and the last preview bytes past them) and maxArtifactBytes of artifacts.
func newStream(maxOutput int64, preview int, maxArtifactBytes int64) *stream {
	return &stream{maxOutput: maxOutput, preview: max(preview, 0), maxArtifacts: maxArtifactBytes, artifacts: map[int]*sink{}}
}

// dataStarted is what frame returns for the first data frame: the program has ended.
type dataStarted struct{}

// frame takes one line and returns what the execution must act on (nil for a data frame after
// the first), or a *violation when the line breaks the protocol.
func (s *stream) frame(line []byte) (any, error) {
	f, err := s.take(line)
	if err != nil {
		return nil, &violation{err.Error()}
	}
	return f, nil
}

func (s *stream) take(line []byte) (any, error) {
	if s.phase == 3 {
		return nil, errors.New("a frame followed the end of the stream")
	}
	if name, b64, ok, err := parseData(line); ok {
		if err != nil {
			return nil, err
		}
		if s.phase == 0 {
			return nil, errors.New("a data frame came before the stream was accepted")
		}
		if err := s.data(name, b64); err != nil {
			return nil, err
		}
		if s.phase == 1 {
			s.phase = 2
			return dataStarted{}, nil
		}
		return nil, nil
	}
	f, err := decodeFrame(line, s.secret)
	if err != nil {
		return nil, err
	}
	switch f := f.(type) {
	case *Accepted:
		if s.phase != 0 {
			return nil, errors.New("a second accepted frame")
		}
		if !validID(f.Execution) {
			return nil, errors.New("the accepted frame names no valid execution id")
		}
		s.phase, s.execution = 1, f.Execution
	case *ErrorFrame:
		if s.phase != 0 {
			return nil, errors.New("an error frame came after the stream was accepted")
		}
		s.phase = 3
	case *Progress:
		if s.phase != 1 {
			return nil, errors.New("a progress frame came outside the running phase")
		}
	case *wire.Call:
		if err := s.callID(f.ID); err != nil {
			return nil, err
		}
	case *wire.Read:
		if err := s.callID(f.ID); err != nil {
			return nil, err
		}
	case *ResultFrame:
		if s.phase != 1 && s.phase != 2 {
			return nil, errors.New("a result frame came before the stream was accepted")
		}
		if f.Execution != s.execution {
			return nil, fmt.Errorf("the result frame is for another execution (%q, not %q)", quote(f.Execution, s.secret), s.execution)
		}
		s.phase = 3
	}
	return f, nil
}

func (s *stream) callID(id int64) error {
	if s.phase != 1 {
		return errors.New("a call or read frame came outside the running phase")
	}
	if id <= s.lastID {
		return fmt.Errorf("call id %d does not follow %d", id, s.lastID)
	}
	s.lastID = id
	return nil
}

var errBase64 = errors.New("a data frame does not hold standard base64")

// data decodes b64 onto its stream, within the stream's ceiling.
func (s *stream) data(name string, b64 []byte) error {
	n, err := decodedLen(b64)
	if err != nil {
		return err
	}
	kind, index, _ := streamName(name)
	switch kind {
	case "stdout":
		return s.output(&s.stdout, b64, n)
	case "stderr":
		return s.output(&s.stderr, b64, n)
	}
	sk := s.artifacts[index]
	if sk == nil {
		sk = &sink{}
		s.artifacts[index] = sk
	}
	fits := s.artifactBytes+int64(n) <= s.maxArtifacts
	if !fits || sk.dropped {
		// An artifact is kept whole or not at all.
		s.artifactBytes -= int64(len(sk.kept))
		sk.kept, fits = nil, false
	}
	sk.n += int64(n)
	if !fits || sk.dropped {
		sk.dropped = true
		return s.decode(b64, nil)
	}
	grow(sk, n, 1<<62)
	if _, err := base64.StdEncoding.Decode(sk.kept[len(sk.kept):len(sk.kept)+n], b64); err != nil {
		return errBase64
	}
	sk.kept = sk.kept[:len(sk.kept)+n]
	s.artifactBytes += int64(n)
	return nil
}

// output decodes n bytes of an output stream: the first maxOutput bytes of the stream are
// kept, and past them its last preview bytes, which its preview needs (the client makes
// previews from what it received, never from what the service says they are).
func (s *stream) output(sk *sink, b64 []byte, n int) error {
	sk.n += int64(n)
	if !sk.dropped && int64(len(sk.kept)+n) <= s.maxOutput {
		grow(sk, n, s.maxOutput)
		if _, err := base64.StdEncoding.Decode(sk.kept[len(sk.kept):len(sk.kept)+n], b64); err != nil {
			return errBase64
		}
		sk.kept = sk.kept[:len(sk.kept)+n]
		return nil
	}
	return s.decode(b64, func(p []byte) {
		if !sk.dropped {
			k := int(min(int64(len(p)), s.maxOutput-int64(len(sk.kept))))
			grow(sk, k, s.maxOutput)
			sk.kept = append(sk.kept, p[:k]...)
			if p = p[k:]; len(p) == 0 {
				return
			}
			sk.dropped = true
			sk.last = make([]byte, 0, s.preview)
			sk.last = appendTail(sk.last, sk.kept, s.preview)
		}
		sk.last = appendTail(sk.last, p, s.preview)
	})
}

// grow makes room for n more kept bytes, by doubling but never past limit.
func grow(sk *sink, n int, limit int64) {
	if cap(sk.kept)-len(sk.kept) >= n {
		return
	}
	size := int64(max(2*cap(sk.kept), len(sk.kept)+n, 4<<10))
	size = max(min(size, limit), int64(len(sk.kept)+n))
	grown := make([]byte, len(sk.kept), size)
	copy(grown, sk.kept)
	sk.kept = grown
}

// appendTail appends p to tail and keeps its last limit bytes, in tail's own memory.
func appendTail(tail, p []byte, limit int) []byte {
	if len(p) >= limit {
		return append(tail[:0], p[len(p)-limit:]...)
	}
	if over := len(tail) + len(p) - limit; over > 0 {
		tail = tail[:copy(tail, tail[over:])]
	}
	return append(tail, p...)
}

// decode decodes b64 through a small scratch buffer, handing each piece to use (when not
// nil): the form of bytes that are not kept is checked all the same.
func (s *stream) decode(b64 []byte, use func([]byte)) error {
	if s.scratch == nil {
		s.scratch = make([]byte, 3<<10)
	}
	for len(b64) > 0 {
		seg := b64[:min(len(b64), 4<<10)]
		n, err := base64.StdEncoding.Decode(s.scratch, seg)
		if err != nil {
			return errBase64
		}
		if use != nil {
			use(s.scratch[:n])
		}
		b64 = b64[len(seg):]
	}
	return nil
}

// decodedLen is how many bytes standard, padded base64 text decodes to. Characters the
// decoder would skip (CR, LF) are refused, so the length is exact.
func decodedLen(b64 []byte) (int, error) {
	if len(b64)%4 != 0 || bytes.IndexByte(b64, '\r') >= 0 {
		return 0, errBase64
	}
	n := len(b64) / 4 * 3
	if i := bytes.IndexByte(b64, '='); i >= 0 {
		if i < len(b64)-2 {
			return 0, errBase64
		}
		n -= len(b64) - i
	}
	return n, nil
}

// validID: an execution id is 1 to 64 characters of [A-Za-z0-9_-], so it can sit in a path.
func validID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
