package container

import (
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// The channel over the container's standard streams, for a runtime that runs containers in a
// VM (Docker Desktop, a Podman machine), where a Unix socket bind-mounted from the host does
// not reach the container. The host writes the token line and then the wire's frames to the
// CLI's stdin (`run -i`), and closes it to ask for a flush before a kill. The bootstrap
// answers on the container's stdout: the token line first, then records.
//
//	host (CLI stdin)                           child (container stdout)
//	  <token>\n ──────────────────────────────▶
//	                                           ◀── <token>\n          checked before any record
//	                                           ◀── [1 0 0 0 len] bytes the program's stdout
//	                                           ◀── [3 0 0 0 len] bytes the wire's frames
//	                                           ◀── [3 0 0 0 0]       the child closed its channel
//	  frames ─────────────────────────────────▶
//
// A record's header is the layout of Docker's attach streams: a stream id, three zero bytes,
// the payload's length as a big-endian uint32, at most maxRecord. Anything else (a wrong
// token, an unknown stream, a non-zero reserved byte, an over-long record) ends the channel
// with errMalformedStreams, a protocol violation; what follows is discarded. The program's
// stderr is the container's stderr, unchanged.
const (
	recordHeader   = 8
	maxRecord      = 1 << 16
	stdoutRecord   = 1
	channelRecord  = 3
	streamsPathArg = "-" // the bootstrap's SOCKET argument that selects stream mode
)

// errMalformedStreams is how the channel ends when the container's stdout breaks the framing.
var errMalformedStreams = errors.New("the sandbox child's standard output broke the stream channel's framing")

// streams is the host's end of a channel over the container's standard streams. As a channel
// it is an io.ReadWriteCloser with CloseWrite and SetWriteDeadline; its demux, the CLI's
// stdout, splits the records. Safe for concurrent use.
type streams struct {
	token []byte
	out   io.Writer      // the program's stdout
	pr    *io.PipeReader // the wire's bytes, as the demux delivers them
	pw    *io.PipeWriter
	ready chan struct{} // closed once the token arrived or the channel failed

	// findPeer, when set, names the interpreter's pid (the container's cgroup) once the token
	// arrived.
	findPeer func() int
	proc     peerProcess

	mu        sync.Mutex // guards the fields below
	stdin     *os.File   // the CLI's stdin: the host's frames
	tokenSeen bool
	closed    bool
	readyOnce sync.Once

	// The demux's state: only the CLI's copy into demux touches it, one Write at a time.
	line         []byte
	head         []byte
	left         int  // payload bytes still due in the current record
	stream       byte // the current record's stream
	broken       bool // framing broken or channel closed: discard everything
	channelEnded bool // an empty channel record came: the child closed its channel
}

func newStreams(token string, out io.Writer) *streams {
	pr, pw := io.Pipe()
	return &streams{token: []byte(token), out: out, pr: pr, pw: pw, ready: make(chan struct{})}
}

// attach hands the channel the CLI's stdin and writes the token line on it.
func (s *streams) attach(stdin *os.File) error {
	s.mu.Lock()
	s.stdin = stdin
	s.mu.Unlock()
	_, err := stdin.Write(append(append([]byte{}, s.token...), '\n'))
	return err
}

func (s *streams) markReady() { s.readyOnce.Do(func() { close(s.ready) }) }

// demux is the CLI's stdout.
func (s *streams) demux() io.Writer { return demuxWriter{s} }

type demuxWriter struct{ s *streams }

func (d demuxWriter) Write(p []byte) (int, error) {
	d.s.feed(p)
	return len(p), nil // never an error: the CLI's stdout is copied to its end, whatever it holds
}

func (s *streams) feed(p []byte) {
	for len(p) > 0 && !s.broken {
		switch {
		case s.line != nil || !s.connected():
			i := 0
			for i < len(p) && p[i] != '\n' && len(s.line) <= len(s.token) {
				i++
			}
			if s.line == nil {
				s.line = []byte{}
			}
			s.line = append(s.line, p[:i]...)
			if len(s.line) > len(s.token) {
				s.breakWith(errMalformedStreams)
				return
			}
			if i == len(p) {
				return
			}
			p = p[i+1:]
			if subtle.ConstantTimeCompare(s.line, s.token) != 1 {
				s.breakWith(errMalformedStreams)
				return
			}
			s.line = nil
			s.mu.Lock()
			s.tokenSeen = true
			s.mu.Unlock()
			if s.findPeer != nil {
				s.proc.Set(s.findPeer())
			}
			s.markReady()
		case s.left == 0:
			n := min(recordHeader-len(s.head), len(p))
			s.head, p = append(s.head, p[:n]...), p[n:]
			if len(s.head) < recordHeader {
				return
			}
			size := binary.BigEndian.Uint32(s.head[4:])
			if (s.head[0] != stdoutRecord && s.head[0] != channelRecord) || s.head[1]|s.head[2]|s.head[3] != 0 ||
				(size == 0 && s.head[0] != channelRecord) || size > maxRecord {
				s.breakWith(fmt.Errorf("%w: a record header % x", errMalformedStreams, s.head))
				return
			}
			s.stream, s.left, s.head = s.head[0], int(size), s.head[:0]
			if size == 0 { // the child closed its channel: its frames end here
				s.channelEnded = true
				s.pw.Close()
			}
		default:
			n := min(s.left, len(p))
			chunk := p[:n]
			p, s.left = p[n:], s.left-n
			if s.stream == stdoutRecord {
				_, _ = s.out.Write(chunk)
			} else if s.channelEnded {
				continue // nothing reads frames after the child's end of them
			} else if _, err := s.pw.Write(chunk); err != nil {
				s.broken = true // the channel was closed: nobody reads the frames any more
			}
		}
	}
}

// breakWith ends the channel's reads with err and discards the rest of the stream.
func (s *streams) breakWith(err error) {
	s.broken = true
	s.pw.CloseWithError(err)
	s.markReady()
}

func (s *streams) connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokenSeen
}

// fail ends the channel's reads once the CLI is reaped (its stdout copied to the end): with
// err when the token never came, with the end of the channel otherwise.
func (s *streams) fail(err error) {
	if s.connected() {
		err = io.EOF
	}
	s.pw.CloseWithError(err)
	s.markReady()
}

func (s *streams) peer() int { return s.proc.Pid() }

func (s *streams) awaitPeerExit(stop <-chan struct{}) bool { return s.proc.AwaitExit(s.ready, stop) }

func (s *streams) peerExiting() bool { return s.proc.Exiting() }

func (s *streams) awaitPeerExitFor(d time.Duration, stop func() bool) bool {
	return s.proc.AwaitExitFor(d, stop)
}

func (s *streams) Read(p []byte) (int, error) {
	n, err := s.pr.Read(p)
	if errors.Is(err, io.ErrClosedPipe) {
		err = net.ErrClosed
	}
	return n, err
}

// attached is the CLI's stdin (nil before attach) and whether Close has run.
func (s *streams) attached() (stdin *os.File, closed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stdin, s.closed
}

func (s *streams) Write(p []byte) (int, error) {
	stdin, closed := s.attached()
	if closed || stdin == nil {
		return 0, net.ErrClosed
	}
	return stdin.Write(p)
}

// CloseWrite closes the CLI's stdin: the bootstrap, which armed its end with O_ASYNC, takes
// the end of its stdin as the sign to flush the program's output and exit.
func (s *streams) CloseWrite() error {
	stdin, _ := s.attached()
	if stdin == nil {
		return errors.New("the sandbox child's stdin is not attached")
	}
	return stdin.Close()
}

// SetWriteDeadline bounds writes to the CLI's stdin (a pipe, so it has deadlines).
func (s *streams) SetWriteDeadline(t time.Time) error {
	stdin, _ := s.attached()
	if stdin == nil {
		return nil
	}
	return stdin.SetWriteDeadline(t)
}

// Close ends both directions: reads return net.ErrClosed, the demux discards what follows
// (the CLI is not held up on its stdout), the CLI's stdin is closed. It is idempotent.
func (s *streams) Close() error {
	s.mu.Lock()
	already := s.closed
	s.closed = true
	stdin := s.stdin
	s.mu.Unlock()
	if already {
		return nil
	}
	s.pr.CloseWithError(net.ErrClosed)
	s.markReady()
	if stdin != nil {
		stdin.Close()
	}
	s.proc.Close()
	return nil
}
