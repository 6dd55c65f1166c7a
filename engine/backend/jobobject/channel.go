package jobobject

import (
	"fmt"
	"io"
	"net"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/tokenconn"
)

// tokenTimeout bounds how long one connection may take to present the token (at most four
// present one at once: tokenconn's default).
const tokenTimeout = 30 * time.Second

// channel is the host's end of one execution's wire channel: a tokenconn.Channel on a TCP
// listener on 127.0.0.1 (the child reads the token from its stdin, a pipe only it holds). Any
// local process can connect, none can pass without the token. It is an io.ReadWriteCloser
// with CloseWrite, safe for concurrent use; it offers no SetWriteDeadline, so the engine's
// write deadline does not apply to it.
type channel struct{ tc *tokenconn.Channel }

// listen opens the channel's listener on a free port of 127.0.0.1.
func listen(token string) (*channel, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return &channel{tokenconn.Serve(ln, token, &tokenconn.Options{Timeout: tokenTimeout,
		Accepted: func(conn net.Conn) { _ = conn.(*net.TCPConn).SetNoDelay(true) }})}, nil
}

// port is the listener's port, which the child is told.
func (c *channel) port() int { return c.tc.Addr().(*net.TCPAddr).Port }

// fail ends the wait for a connection with err (the child exited, or the channel closed):
// Read and Write then return it. It does nothing once a connection is accepted.
func (c *channel) fail(err error) { c.tc.Fail(err) }

func (c *channel) Read(p []byte) (int, error)  { return c.tc.Read(p) }
func (c *channel) Write(p []byte) (int, error) { return c.tc.Write(p) }

// CloseWrite shuts down the host's half of an accepted connection (engine.FlushGrace): the
// child sees the end of its input.
func (c *channel) CloseWrite() error { return c.tc.CloseWrite() }

// Close closes the listener and any connection, and waits for the accept loop and the token
// readers. It is idempotent.
func (c *channel) Close() error { return c.tc.Close() }

// errNoChild reads as the end of the channel, which is what it is to the Runner.
var errNoChild = fmt.Errorf("the sandbox child exited before it connected: %w", io.EOF)
