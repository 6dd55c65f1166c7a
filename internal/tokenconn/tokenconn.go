package tokenconn

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

const (
	// tokenBytes is the token's entropy; it travels as hex (64 digits).
	tokenBytes = 32
	// defaultMaxPending is Options.MaxPending when it is 0.
	defaultMaxPending = 4
)

// NewToken mints one execution's token.
func NewToken() string {
	var b [tokenBytes]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Options are what differs between the backends that serve a Channel.
type Options struct {
	// Timeout bounds how long one connection may take to present the token.
	Timeout time.Duration
	// MaxPending bounds the connections presenting a token at once; more are dropped. 0 is
	// four.
	MaxPending int
	// Accepted, when set, runs once on the connection that presented the token, with the
	// Channel's lock held, before Read and Write use it (TCP_NODELAY, the peer's pid).
	Accepted func(net.Conn)
	// OnEnd, when set, runs once before Read reports the end (an end of file or a reset) of
	// the accepted connection.
	OnEnd func()
}

// Channel is the host's end of one execution's channel. Until a connection has presented the
// token, Read and Write wait; Fail ends that wait. It is an io.ReadWriteCloser with CloseWrite
// and SetWriteDeadline.
type Channel struct {
	ln    net.Listener
	token []byte
	opts  Options
	ready chan struct{} // closed once conn is set or the channel has failed

	endOnce sync.Once

	mu       sync.Mutex // guards everything below
	conn     net.Conn
	err      error // why there is no conn, once ready is closed without one
	pending  map[net.Conn]bool
	deadline time.Time

	loops sync.WaitGroup // the accept loop and the token readers
}

// Serve takes ln over (the Channel closes it) and accepts on it until a connection presents
// token. opts must set Timeout.
func Serve(ln net.Listener, token string, opts *Options) *Channel {
	c := &Channel{ln: ln, token: []byte(token), opts: *opts, ready: make(chan struct{}), pending: map[net.Conn]bool{}}
	if c.opts.MaxPending == 0 {
		c.opts.MaxPending = defaultMaxPending
	}
	c.loops.Add(1)
	go c.accept()
	return c
}

// Addr is the listener's address.
func (c *Channel) Addr() net.Addr { return c.ln.Addr() }

func (c *Channel) accept() {
	defer c.loops.Done()
	for {
		conn, err := c.ln.Accept()
		if err != nil {
			return // closed: the token arrived, or the channel was closed
		}
		c.mu.Lock()
		if c.conn != nil || c.err != nil || len(c.pending) >= c.opts.MaxPending {
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
func (c *Channel) check(conn net.Conn) {
	defer c.loops.Done()
	_ = conn.SetReadDeadline(time.Now().Add(c.opts.Timeout))
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
	if c.opts.Accepted != nil {
		c.opts.Accepted(conn)
	}
	c.conn = conn
	c.stop()
}

// stop closes the listener (no second connection) and the pending connections, and ends the
// wait. The caller holds mu, and calls it once: with conn set, or with err.
func (c *Channel) stop() {
	c.ln.Close()
	for p := range c.pending {
		p.Close()
	}
	close(c.ready)
}

// Fail ends the wait for a connection with err (the child exited, or the channel closed):
// Read and Write then return it. It does nothing once a connection is accepted.
func (c *Channel) Fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil || c.err != nil {
		return
	}
	c.err = err
	c.stop()
}

// Ready is closed once a connection is accepted or the channel has failed.
func (c *Channel) Ready() <-chan struct{} { return c.ready }

// Connected reports whether a connection presented the token.
func (c *Channel) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn != nil
}

func (c *Channel) wait() (net.Conn, error) {
	<-c.ready
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return nil, c.err
	}
	return c.conn, nil
}

func (c *Channel) Read(p []byte) (int, error) {
	conn, err := c.wait()
	if err != nil {
		return 0, err
	}
	n, err := conn.Read(p)
	if c.opts.OnEnd != nil && (errors.Is(err, io.EOF) || errors.Is(err, errReset)) {
		c.endOnce.Do(c.opts.OnEnd)
	}
	return n, err
}

func (c *Channel) Write(p []byte) (int, error) {
	conn, err := c.wait()
	if err != nil {
		return 0, err
	}
	return conn.Write(p)
}

// CloseWrite shuts down the host's half of the accepted connection: the child sees the end of
// its input (engine.FlushGrace).
func (c *Channel) CloseWrite() error {
	c.mu.Lock()
	conn := c.conn
	c.mu.Unlock()
	if conn == nil {
		return errors.New("the sandbox child never connected")
	}
	hc, ok := conn.(interface{ CloseWrite() error })
	if !ok {
		return errors.New("the channel's connection cannot close one half")
	}
	return hc.CloseWrite()
}

// SetWriteDeadline applies to the connection now or once it is accepted.
func (c *Channel) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline = t
	if c.conn != nil {
		return c.conn.SetWriteDeadline(t)
	}
	return nil
}

// Close closes the listener and any connection, and waits for the accept loop and the token
// readers. It is idempotent.
func (c *Channel) Close() error {
	c.Fail(net.ErrClosed)
	c.mu.Lock()
	if c.conn != nil {
		c.conn.Close()
	}
	c.mu.Unlock()
	c.loops.Wait()
	return nil
}
