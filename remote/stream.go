package remote

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"

	"github.com/mcp-sandbox/mcp-sandbox/engine/wire"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
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
// Each output stream is kept in an outputs.Capture, as a local child's is: its head to the
// ceiling, its last preview bytes past it, and its count (the client makes previews from
// what it received, never from what the service says they are). It belongs to the goroutine
// that reads the stream until result or an error, and is read by the execution only after.
type stream struct {
	maxArtifacts int64 // all artifacts together: an artifact that does not fit is dropped whole
	scratch      []byte
	secret       string // the credential, scrubbed from what a violation quotes

	phase     int // 0: before accepted, 1: running, 2: data, 3: ended
	execution string
	lastID    int64

	stdout, stderr *outputs.Capture
	artifacts      map[int]*artifact
	artifactBytes  int64 // kept
}

// artifact is what one artifact's data frames delivered.
type artifact struct {
	kept    []byte
	n       int64 // bytes received, kept or not
	dropped bool  // some were not kept
}

// newStream returns the grammar of one stream that keeps maxOutput bytes of each output
// stream (and the last preview bytes past them) and maxArtifactBytes of artifacts.
func newStream(maxOutput int64, preview int, maxArtifactBytes int64) *stream {
	return &stream{stdout: outputs.NewCapture(maxOutput, int64(preview)), stderr: outputs.NewCapture(maxOutput, int64(preview)),
		maxArtifacts: maxArtifactBytes, artifacts: map[int]*artifact{}}
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
		return s.decode(b64, func(p []byte) { s.stdout.Write(p) })
	case "stderr":
		return s.decode(b64, func(p []byte) { s.stderr.Write(p) })
	}
	a := s.artifacts[index]
	if a == nil {
		a = &artifact{}
		s.artifacts[index] = a
	}
	fits := s.artifactBytes+int64(n) <= s.maxArtifacts
	if !fits || a.dropped {
		// An artifact is kept whole or not at all.
		s.artifactBytes -= int64(len(a.kept))
		a.kept, fits = nil, false
	}
	a.n += int64(n)
	if !fits || a.dropped {
		a.dropped = true
		return s.decode(b64, nil)
	}
	a.kept = slices.Grow(a.kept, n)
	if _, err := base64.StdEncoding.Decode(a.kept[len(a.kept):len(a.kept)+n], b64); err != nil {
		return errBase64
	}
	a.kept = a.kept[:len(a.kept)+n]
	s.artifactBytes += int64(n)
	return nil
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
