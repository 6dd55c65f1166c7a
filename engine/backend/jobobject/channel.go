package jobobject

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

const (
	// tokenBytes is the token's entropy; it travels as hex.
	tokenBytes = 32
	// tokenTimeout bounds how long one connection may take to present the token.
	tokenTimeout = 30 * time.Second
	// maxPending bounds the connections presenting a token at once; more are dropped.
	maxPending = 4
)

// newToken mints one execution's token.
func newToken() string {
	var b [tokenBytes]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// channel is the host's end of one execution's wire channel: a TCP listener on 127.0.0.1
// that accepts exactly one connection, the first to present the execution's token as its
// first line (the child reads the token from its stdin, a pipe only it holds). Until then
// Read and Write wait; once a connection is accepted the listener is closed, so no second
// one is taken. Any local process can connect, none can pass without the token. It is an
// io.ReadWriteCloser with CloseWrite, safe for concurrent use.
type channel struct {
	ln    net.Listener
	token []byte
	ready chan struct{} // closed once conn is set or the channel has failed

	mu      sync.Mutex // guards everything below
	conn    *net.TCPConn
	err     error // why there is no conn, once ready is closed without one
	pending map[net.Conn]bool

	loops sync.WaitGroup // the accept loop and the token readers
}

// listen opens the channel's listener on a free port of 127.0.0.1.
func listen(token string) (*channel, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	c := &channel{ln: ln, token: []byte(token), ready: make(chan struct{}), pending: map[net.Conn]bool{}}
	c.loops.Add(1)
	go c.accept()
	return c, nil
}

// port is the listener's port, which the child is told.
func (c *channel) port() int { return c.ln.Addr().(*net.TCPAddr).Port }

func (c *channel) accept() {
	defer c.loops.Done()
	for {
		conn, err := c.ln.Accept()
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
		go c.check(conn.(*net.TCPConn))
	}
}

// check reads one line from conn, byte by byte so that nothing after it is consumed, and
// makes conn the channel when the line is the token.
func (c *channel) check(conn *net.TCPConn) {
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
	_ = conn.SetNoDelay(true)
	c.conn = conn
	c.ln.Close() // no second connection
	for p := range c.pending {
		p.Close()
	}
	close(c.ready)
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
	c.ln.Close()
	for p := range c.pending {
		p.Close()
	}
	close(c.ready)
}

func (c *channel) wait() (*net.TCPConn, error) {
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
	return conn.Read(p)
}

func (c *channel) Write(p []byte) (int, error) {
	conn, err := c.wait()
	if err != nil {
		return 0, err
	}
	return conn.Write(p)
}

// CloseWrite shuts down the host's half of an accepted connection (engine.FlushGrace): the
// child sees the end of its input.
func (c *channel) CloseWrite() error {
	c.mu.Lock()
	conn := c.conn
	c.mu.Unlock()
	if conn == nil {
		return errors.New("the sandbox child never connected")
	}
	return conn.CloseWrite()
}

// Close closes the listener and any connection, and waits for the accept loop and the token
// readers. It is idempotent.
func (c *channel) Close() error {
	c.fail(net.ErrClosed)
	c.mu.Lock()
	if c.conn != nil {
		c.conn.Close()
	}
	c.mu.Unlock()
	c.loops.Wait()
	return nil
}

// errNoChild reads as the end of the channel, which is what it is to the Runner.
var errNoChild = fmt.Errorf("the sandbox child exited before it connected: %w", io.EOF)
