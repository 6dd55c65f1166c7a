package mcpserver

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// StdioTransport is the transport of `serve --transport stdio`: newline-delimited JSON-RPC
// over in and out, as go-sdk's StdioTransport, except that the end of the input does not end
// the requests already read. go-sdk answers nothing after its reader sees EOF (it cancels the
// handlers in flight and refuses their writes), so a host that writes its requests and then
// closes stdin (a shell pipe, a script) would get only the first answer. Here every request
// read before the input ended is answered before the session ends (docs/design.md §14.3).
// out is never closed: it is the process's stdout.
func StdioTransport(in io.ReadCloser, out io.Writer) mcp.Transport {
	return &stdioTransport{inner: &mcp.IOTransport{Reader: in, Writer: nopWriteCloser{out}}}
}

// ServeStdio serves srv's one session over in and out (StdioTransport) until the host ends
// it or ctx ends (a signal), which closes the session and ends its calls in flight. Either
// is a normal end: only a failure of the session itself is returned.
func ServeStdio(ctx context.Context, srv *mcp.Server, in io.ReadCloser, out io.Writer) error {
	ss, err := srv.Connect(ctx, StdioTransport(in, out), nil)
	if err != nil {
		return err
	}
	ended := make(chan error, 1)
	go func() { ended <- ss.Wait() }()
	select {
	case err := <-ended:
		return err
	case <-ctx.Done():
		_ = ss.Close()
		<-ended
		return nil
	}
}

type stdioTransport struct{ inner mcp.Transport }

func (t *stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &drainingConn{Connection: c, pending: map[any]bool{}, outgoing: map[any]bool{},
		settled: make(chan struct{}), closed: make(chan struct{})}, nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// drainingConn holds back the input's end (the error its Read returns) until the requests
// read before it are answered. It settles early, giving up on them, when one of them can no
// longer be answered: the server asked the host something (elicitation, sampling, roots),
// whose answer would come on the input that has ended, or a write failed.
type drainingConn struct {
	mcp.Connection

	mu       sync.Mutex
	pending  map[any]bool // ids of the host's requests read and not answered yet
	outgoing map[any]bool // ids of the server's requests to the host not answered yet
	ended    bool         // the input ended
	settled  chan struct{}
	settle   sync.Once

	closed    chan struct{}
	closeOnce sync.Once
}

func (c *drainingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err == nil {
		c.mu.Lock()
		switch m := msg.(type) {
		case *jsonrpc.Request:
			if m.IsCall() {
				c.pending[m.ID.Raw()] = true
			}
		case *jsonrpc.Response:
			delete(c.outgoing, m.ID.Raw())
		}
		c.mu.Unlock()
		return msg, nil
	}
	if !errors.Is(err, io.EOF) {
		return nil, err
	}
	c.mu.Lock()
	c.ended = true
	c.check()
	c.mu.Unlock()
	select {
	case <-c.settled:
	case <-c.closed:
	case <-ctx.Done():
	}
	return nil, err
}

func (c *drainingConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	req, isReq := msg.(*jsonrpc.Request)
	if isReq && req.IsCall() {
		c.mu.Lock()
		c.outgoing[req.ID.Raw()] = true
		c.check()
		c.mu.Unlock()
	}
	err := c.Connection.Write(ctx, msg)
	c.mu.Lock()
	defer c.mu.Unlock()
	if resp, ok := msg.(*jsonrpc.Response); ok {
		delete(c.pending, resp.ID.Raw())
	}
	if err != nil {
		c.settle.Do(func() { close(c.settled) }) // nothing more reaches the host
		return err
	}
	c.check()
	return nil
}

// check settles once the input has ended and either every request read is answered or one
// waits on an answer from the host. c.mu is held.
func (c *drainingConn) check() {
	if c.ended && (len(c.pending) == 0 || len(c.outgoing) > 0) {
		c.settle.Do(func() { close(c.settled) })
	}
}

func (c *drainingConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Connection.Close()
}
