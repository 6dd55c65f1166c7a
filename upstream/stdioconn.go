package upstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/toolshape"
)

// A stdio upstream's frames (one JSON-RPC message per line) are read here rather than by the
// go-sdk's IOTransport, whose json.Decoder keeps the buffer grown for the largest frame for
// as long as the connection lives and ends the connection on one frame over its bound:
//
//   - A frame is at most the server's frame bound (DefaultMaxFrameBytes unless the Server
//     says otherwise; no budget raises it). A longer one is not kept: the rest of its line is
//     read and dropped, and if its top-level "id" was seen on the way (idScanner) the call
//     gets a JSON-RPC error saying the answer was too large (codeFrameTooLarge, which Invoke
//     turns into a message naming the bound); the connection goes on.
//   - A frame that grows past smallFrame first takes its share of largeFrames, a bound on the
//     bytes every connection of this process may hold in large frames at once, so many
//     upstreams answering large at once wait their turn (the pipe pushes back on them)
//     rather than all being held together. A frame takes min(its bound, the whole) at once:
//     none waits holding part of it.
//   - The buffer grown for a large frame is dropped after it; once no large frame has been
//     read for a few seconds, the heap is collected and returned to the system
//     (releaseSoon), so a burst of large answers does not leave the server holding its peak.

// smallFrame is the size below which a frame is read without taking a share of largeFrames,
// and the largest buffer a connection keeps between frames.
const smallFrame = 1 << 20

// maxLargeFrameBytes bounds the bytes of large frames (over smallFrame) read at once by every
// stdio connection of this process: four frames of the default bound.
const maxLargeFrameBytes = 4 * DefaultMaxFrameBytes

// codeFrameTooLarge is the JSON-RPC error code of the answer that stands for a frame over its
// bound (in the implementation-defined server error range), codeFrameTooDeep for one nested
// deeper than maxFrameDepth.
const (
	codeFrameTooLarge = -32001
	codeFrameTooDeep  = -32002
)

// maxFrameDepth is how deep a frame may nest: the go-sdk's decoder refuses deeper ones.
const maxFrameDepth = 1000

// largeFrames is the process-wide share of large frames (see above).
var largeFrames = newByteSemaphore(maxLargeFrameBytes)

// stdioTransport is the mcp.Transport over a stdio process's pipes.
type stdioTransport struct {
	r     io.Reader
	w     io.Writer
	close func()
	limit int
}

func (t *stdioTransport) Connect(context.Context) (mcp.Connection, error) {
	return newStdioConn(t.r, t.w, t.close, t.limit), nil
}

// stdioConn is one stdio connection: a goroutine reads frames off r and hands them to Read;
// Write writes one frame at a time to w. Close (idempotent, safe concurrently) ends the
// reading goroutine's wait and calls closeFn, which must make r return (the process closes).
type stdioConn struct {
	w        io.Writer
	closeFn  func()
	incoming chan frameOrErr
	closed   chan struct{}
	once     sync.Once

	wmu sync.Mutex // one frame written at a time
}

type frameOrErr struct {
	msg jsonrpc.Message
	err error
}

func newStdioConn(r io.Reader, w io.Writer, closeFn func(), limit int) *stdioConn {
	if limit <= 0 {
		limit = DefaultMaxFrameBytes
	}
	c := &stdioConn{w: w, closeFn: closeFn, incoming: make(chan frameOrErr), closed: make(chan struct{})}
	go c.read(bufio.NewReaderSize(r, 64<<10), limit)
	return c
}

func (c *stdioConn) deliver(f frameOrErr) bool {
	select {
	case c.incoming <- f:
		return true
	case <-c.closed:
		return false
	}
}

// read reads frames until the stream ends, fails, or the connection closes.
func (c *stdioConn) read(br *bufio.Reader, limit int) {
	var buf []byte
	for {
		line, held, err := c.frame(br, buf[:0], limit)
		if held > 0 {
			largeFrames.release(held)
		}
		if err != nil {
			var over *overFrame
			if errors.As(err, &over) {
				buf = nil
				releaseSoon()
				if msg, ok := over.response(limit); ok {
					if !c.deliver(frameOrErr{msg: msg}) {
						return
					}
					continue
				}
			}
			c.deliver(frameOrErr{err: err})
			return
		}
		if len(bytes.TrimSpace(line)) == 0 {
			buf = line
			continue
		}
		if d := NestingDepth(line); d > maxFrameDepth {
			// The go-sdk's decoder would refuse it and end the session: the call it answers
			// is told instead, when its id can be read.
			var s idScanner
			s.feed(line)
			if msg, ok := (&overFrame{bytes: int64(len(line)), id: s.id(), depth: d}).response(limit); ok {
				buf = nil
				if !c.deliver(frameOrErr{msg: msg}) {
					return
				}
				continue
			}
		}
		msg, derr := decodeFrame(line)
		if cap(line) > smallFrame {
			buf = nil // the decoded message holds its own copy; the grown buffer goes
			releaseSoon()
		} else {
			buf = line
		}
		if derr != nil {
			derr = fmt.Errorf("a frame from the server is not a JSON-RPC message: %w", derr)
		}
		if !c.deliver(frameOrErr{msg: msg, err: derr}) || derr != nil {
			return
		}
	}
}

// overFrame is a frame over its bound (or, depth > 0, nested too deep): its bytes, and its
// top-level id when one was seen.
type overFrame struct {
	bytes int64
	id    json.RawMessage
	depth int
}

func (o *overFrame) Error() string {
	return fmt.Sprintf("a frame of %d bytes from the server, over its bound, had no id to answer", o.bytes)
}

// response is the error answer that stands for the frame; ok is false when its id is not one.
func (o *overFrame) response(limit int) (_ jsonrpc.Message, ok bool) {
	var v any
	if err := json.Unmarshal(o.id, &v); err != nil {
		return nil, false
	}
	id, err := jsonrpc.MakeID(v)
	if err != nil || !id.IsValid() {
		return nil, false
	}
	data, _ := json.Marshal(map[string]int64{"bytes": o.bytes, "limit": int64(limit), "depth": int64(o.depth)})
	if o.depth > 0 {
		return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: codeFrameTooDeep,
			Message: fmt.Sprintf("the answer nests %d levels deep, more than the %d a frame may", o.depth, maxFrameDepth),
			Data:    data}}, true
	}
	return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: codeFrameTooLarge,
		Message: fmt.Sprintf("the answer was %d bytes, over the %d a frame from a stdio upstream may be", o.bytes, limit),
		Data:    data}}, true
}

// frame reads one line into buf (without its newline), taking a share of largeFrames once it
// grows past smallFrame (held says how much, for the caller to release). A line over limit is
// read to its end and dropped: *overFrame.
func (c *stdioConn) frame(br *bufio.Reader, buf []byte, limit int) (line []byte, held int64, err error) {
	for {
		chunk, rerr := br.ReadSlice('\n')
		if len(buf)+len(chunk) > smallFrame && held == 0 {
			held = int64(min(limit, maxLargeFrameBytes))
			if !largeFrames.acquire(held, c.closed) {
				return nil, 0, io.ErrClosedPipe
			}
		}
		if len(buf)+len(chunk) > limit+2 { // the newline, and a \r before it
			return nil, held, c.drop(br, buf, chunk, rerr)
		}
		buf = append(buf, chunk...)
		switch {
		case rerr == nil:
			return bytes.TrimRight(buf, "\r\n"), held, nil
		case errors.Is(rerr, bufio.ErrBufferFull):
			continue
		case errors.Is(rerr, io.EOF) && len(bytes.TrimSpace(buf)) > 0:
			return nil, held, io.ErrUnexpectedEOF
		default:
			return nil, held, rerr
		}
	}
}

// drop reads the rest of an over-long line, looking for its top-level id on the way.
func (c *stdioConn) drop(br *bufio.Reader, head, chunk []byte, rerr error) error {
	var s idScanner
	s.feed(head)
	s.feed(chunk)
	n := int64(len(head) + len(chunk))
	for errors.Is(rerr, bufio.ErrBufferFull) {
		chunk, rerr = br.ReadSlice('\n')
		s.feed(chunk)
		n += int64(len(chunk))
	}
	if rerr != nil {
		return rerr
	}
	return &overFrame{bytes: n, id: s.id()}
}

func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case f := <-c.incoming:
		return f.msg, f.err
	case <-c.closed:
		return nil, io.EOF
	}
}

func (c *stdioConn) Write(_ context.Context, msg jsonrpc.Message) error {
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err = c.w.Write(append(data, '\n'))
	return err
}

func (c *stdioConn) Close() error {
	c.once.Do(func() {
		close(c.closed)
		c.closeFn()
	})
	return nil
}

func (c *stdioConn) SessionID() string { return "" }

// idScanner follows a JSON object fed to it in pieces, with no more memory than a short key
// and value, and keeps the value of its top-level "id".
type idScanner struct {
	depth      int
	inString   bool
	escaped    bool
	expectKey  bool // at depth 1, the next string is a key
	inKey      bool // reading a top-level key
	key        []byte
	keyLong    bool
	collecting bool // reading the top-level id's value
	val        []byte
	valLong    bool
	found      json.RawMessage
}

// maxIDBytes bounds the id an idScanner keeps; a longer one is not answered.
const maxIDBytes = 128

func (s *idScanner) feed(p []byte) {
	for _, b := range p {
		s.step(b)
	}
}

func (s *idScanner) step(b byte) {
	if s.collecting {
		if !s.inString && s.depth == 1 && (b == ',' || b == '}') {
			if v := bytes.TrimSpace(s.val); !s.valLong && len(v) > 0 && s.found == nil {
				s.found = append(json.RawMessage(nil), v...)
			}
			s.collecting, s.val = false, nil
		} else if len(s.val) < maxIDBytes {
			s.val = append(s.val, b)
		} else {
			s.valLong = true
		}
	}
	if s.inString {
		switch {
		case s.escaped:
			s.escaped = false
		case b == '\\':
			s.escaped = true
		case b == '"':
			s.inString, s.inKey = false, false
			return
		}
		if s.inKey {
			if len(s.key) < 16 {
				s.key = append(s.key, b)
			} else {
				s.keyLong = true
			}
		}
		return
	}
	switch b {
	case '"':
		s.inString = true
		if s.depth == 1 && s.expectKey {
			s.inKey, s.key, s.keyLong = true, s.key[:0], false
		}
	case ':':
		if s.depth == 1 && s.expectKey {
			s.expectKey = false
			if !s.keyLong && string(s.key) == "id" {
				s.collecting, s.val, s.valLong = true, nil, false
			}
		}
	case ',':
		if s.depth == 1 {
			s.expectKey = true
		}
	case '{', '[':
		s.depth++
		if s.depth == 1 && b == '{' {
			s.expectKey = true
		}
	case '}', ']':
		s.depth--
	}
}

// id returns the top-level id seen, or nil.
func (s *idScanner) id() json.RawMessage { return s.found }

// byteSemaphore is a weighted semaphore: acquire waits until n bytes are free or done closes.
type byteSemaphore struct {
	mu      sync.Mutex
	free    int64
	waiters []chan struct{} // woken, all, whenever bytes are released
}

func newByteSemaphore(n int64) *byteSemaphore { return &byteSemaphore{free: n} }

func (s *byteSemaphore) acquire(n int64, done <-chan struct{}) bool {
	for {
		s.mu.Lock()
		if s.free >= n {
			s.free -= n
			s.mu.Unlock()
			return true
		}
		wake := make(chan struct{})
		s.waiters = append(s.waiters, wake)
		s.mu.Unlock()
		select {
		case <-wake:
		case <-done:
			return false
		}
	}
}

func (s *byteSemaphore) release(n int64) {
	s.mu.Lock()
	s.free += n
	w := s.waiters
	s.waiters = nil
	s.mu.Unlock()
	for _, c := range w {
		close(c)
	}
}

// releaseDelay is how long after the last large frame the heap is returned to the system.
const releaseDelay = 3 * time.Second

var (
	releaseMu    sync.Mutex
	releaseTimer *time.Timer
)

// releaseSoon returns the memory of large frames to the system releaseDelay after the last
// one: a collection that the runtime, with nothing else allocating, would otherwise put off
// for minutes while the server sits on its peak.
func releaseSoon() {
	releaseMu.Lock()
	defer releaseMu.Unlock()
	if releaseTimer == nil {
		releaseTimer = time.AfterFunc(releaseDelay, debug.FreeOSMemory)
		return
	}
	releaseTimer.Reset(releaseDelay)
}

// NestingDepth returns how deep the JSON text v nests its arrays and objects (0 for a
// scalar), reading it once, without decoding it.
func NestingDepth(v []byte) int { return toolshape.NestingDepth(v) }
