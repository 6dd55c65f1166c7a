//go:build linux

package container

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// tokenBytes is the token's entropy; it travels as hex.
	tokenBytes = 32
	// tokenTimeout bounds how long a connection may take to present the token.
	tokenTimeout = 5 * time.Second
	// maxPending bounds the connections presenting a token at once; more are dropped.
	maxPending = 4
)

// newToken mints one execution's token.
func newToken() string {
	var b [tokenBytes]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// channel is the host's end of one execution's wire channel: a Unix socket that accepts
// exactly one connection, the first to present the token as its first line. Until then Read
// and Write wait; once a connection is accepted the listener is closed and its socket file
// removed, so a second connection is refused. It is an io.ReadWriteCloser with
// SetWriteDeadline, safe for concurrent use.
type channel struct {
	ln    *net.UnixListener
	path  string
	token []byte
	ready chan struct{} // closed once conn is set or the channel has failed

	// onEnd, when set, runs once before Read reports the end of an accepted connection.
	onEnd   func()
	endOnce sync.Once

	mu       sync.Mutex // guards everything below
	conn     *net.UnixConn
	err      error // why there is no conn, once ready is closed without one
	pending  map[net.Conn]bool
	deadline time.Time

	loops sync.WaitGroup // the accept loop and the token readers
	proc  peerProcess    // the process that connected
}

// listen creates the socket at path, readable and writable by anyone who can reach its
// directory (the directory's permissions are the access control; the token is the proof).
// A socket's path is bounded (108 bytes), and a state directory may be deep: the socket is
// bound through the directory's descriptor, so only its own name counts.
func listen(path, token string) (*channel, error) {
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	short := fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), filepath.Base(path))
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: short, Net: "unix"})
	if err != nil {
		return nil, err
	}
	// Closing the listener must remove the socket by a name that still resolves.
	ln.SetUnlinkOnClose(false)
	c := &channel{ln: ln, path: path, token: []byte(token), ready: make(chan struct{}), pending: map[net.Conn]bool{}, proc: newPeerProcess()}
	if err := os.Chmod(path, 0o666); err != nil {
		c.closeListener()
		return nil, err
	}
	c.loops.Add(1)
	go c.accept()
	return c, nil
}

func (c *channel) accept() {
	defer c.loops.Done()
	for {
		conn, err := c.ln.AcceptUnix()
		if err != nil {
			return // closed: the token arrived, or the channel was closed
		}
		c.mu.Lock()
		if c.conn != nil || c.err != nil || len(c.pending) >= maxPending {
			c.mu.Unlock()
			conn.Close()
			continue
		}
		c.pending[conn] = true
		c.loops.Add(1)
		c.mu.Unlock()
		go c.check(conn)
	}
}

// check reads one line from conn, byte by byte so that nothing after it is consumed, and
// makes conn the channel when the line is the token.
func (c *channel) check(conn *net.UnixConn) {
	defer c.loops.Done()
	_ = conn.SetReadDeadline(time.Now().Add(tokenTimeout))
	line := make([]byte, 0, len(c.token)+1)
	var b [1]byte
	ok := false
	for len(line) <= len(c.token) {
		if _, err := io.ReadFull(conn, b[:]); err != nil {
			break
		}
		if b[0] == '\n' {
			ok = subtle.ConstantTimeCompare(line, c.token) == 1
			break
		}
		line = append(line, b[0])
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, conn)
	if !ok || c.conn != nil || c.err != nil {
		conn.Close()
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	if !c.deadline.IsZero() {
		_ = conn.SetWriteDeadline(c.deadline)
	}
	c.conn = conn
	c.proc.set(peerPID(conn))
	c.closeListener() // a second connection is refused
	for p := range c.pending {
		p.Close()
	}
	close(c.ready)
}

// closeListener stops accepting and removes the socket file.
func (c *channel) closeListener() {
	c.ln.Close()
	_ = os.Remove(c.path)
}

func peerPID(conn *net.UnixConn) int {
	raw, err := conn.SyscallConn()
	if err != nil {
		return 0
	}
	pid := 0
	_ = raw.Control(func(fd uintptr) {
		if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
			pid = int(cred.Pid)
		}
	})
	return pid
}

// fail ends the wait for a connection with err (the child exited, or the channel closed):
// Read and Write then return it. It does nothing once a connection is accepted.
func (c *channel) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil || c.err != nil {
		return
	}
	c.err = err
	c.closeListener()
	for p := range c.pending {
		p.Close()
	}
	close(c.ready)
}

// connected reports whether the child presented its token.
func (c *channel) connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn != nil
}

// peer is the pid (in this process's pid namespace) of the process that connected, 0 when
// unknown or not visible from here.
func (c *channel) peer() int { return c.proc.get() }

func (c *channel) wait() (*net.UnixConn, error) {
	<-c.ready
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return nil, c.err
	}
	return c.conn, nil
}

func (c *channel) Read(p []byte) (int, error) {
	conn, err := c.wait()
	if err != nil {
		return 0, err
	}
	n, err := conn.Read(p)
	if (errors.Is(err, io.EOF) || errors.Is(err, unix.ECONNRESET)) && c.onEnd != nil {
		c.endOnce.Do(c.onEnd)
	}
	return n, err
}

// awaitPeerExit blocks until the process that connected has exited, or stop is closed, or
// the channel ended without a connection; it reports whether the peer exited.
func (c *channel) awaitPeerExit(stop <-chan struct{}) bool { return c.proc.awaitExit(c.ready, stop) }

// awaitPeerExitFor waits up to d for the process that connected to be exiting, returning
// early when stop reports true; it reports whether the peer is exiting.
func (c *channel) awaitPeerExitFor(d time.Duration, stop func() bool) bool {
	return c.proc.awaitExitFor(d, stop)
}

func (c *channel) Write(p []byte) (int, error) {
	conn, err := c.wait()
	if err != nil {
		return 0, err
	}
	return conn.Write(p)
}

// CloseWrite shuts down the host's half of an accepted connection: the bootstrap, which armed
// its end with O_ASYNC, takes the hang-up as the sign to flush the program's output and exit
// before the tree is killed (engine.FlushGrace).
func (c *channel) CloseWrite() error {
	c.mu.Lock()
	conn := c.conn
	c.mu.Unlock()
	if conn == nil {
		return errors.New("the sandbox child never connected")
	}
	return conn.CloseWrite()
}

// SetWriteDeadline applies to the connection now or once it is accepted.
func (c *channel) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline = t
	if c.conn != nil {
		return c.conn.SetWriteDeadline(t)
	}
	return nil
}

// Close closes the listener, any connection and the peer's pidfd, and waits for the accept
// loop and the token readers. It is idempotent.
func (c *channel) Close() error {
	c.fail(net.ErrClosed)
	c.mu.Lock()
	if c.conn != nil {
		c.conn.Close()
	}
	c.mu.Unlock()
	c.proc.close()
	c.loops.Wait()
	return nil
}

// errNoChild reads as the end of the channel, which is what it is to the Runner.
var errNoChild = fmt.Errorf("the sandbox child exited before it connected: %w", io.EOF)
