package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
)

// session is the link of an MCP server: one client session, opened lazily (a stdio server
// started, an HTTP one connected), dropped when it breaks so the next call reconnects
// (docs/design.md §13.6). mu is a leaf; c.lock is held while connecting.
type session struct {
	c *conn

	mu       sync.Mutex
	cs       *mcp.ClientSession // nil when not connected
	proc     *process
	started  bool     // a session was established once: later starts get the connect timeout
	starting *process // a stdio server started and not yet initialized: shutdown kills it
	down     bool     // shut down for good
}

// list returns the server's tools from tools/list on its session (connecting if need be; a
// broken session is dropped).
func (s *session) list(ctx context.Context) (listing, error) {
	cs, err := s.sessionLocked(ctx)
	if err != nil {
		return listing{}, err
	}
	l, err := s.listAll(ctx, cs)
	if err != nil {
		s.dropIfBroken(cs, err)
	}
	return l, err
}

// listAll reads every page of tools/list, up to maxListPages pages and maxListBytes of tool
// definitions: a listing past either keeps what it read and says where it stopped.
func (s *session) listAll(ctx context.Context, cs *mcp.ClientSession) (listing, error) {
	ctx, cancel := context.WithTimeout(ctx, s.c.srv.callTimeout())
	defer cancel()
	var (
		l      listing
		bytes  int
		cursor string
	)
	for range maxListPages {
		res, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return listing{}, err
		}
		for _, d := range res.Tools {
			if d == nil {
				continue
			}
			if bytes += defBytes(d); bytes > maxListBytes {
				l.cut = fmt.Sprintf("the listing was cut after %d tools: tool definitions passed %d bytes", len(l.defs), maxListBytes)
				return l, nil
			}
			l.defs = append(l.defs, d)
		}
		if res.NextCursor == "" {
			return l, nil
		}
		cursor = res.NextCursor
	}
	l.cut = fmt.Sprintf("the listing was cut after %d tools: tools/list did not end after %d pages", len(l.defs), maxListPages)
	return l, nil
}

// call makes one tools/call on the live session, connecting when there is none.
func (s *session) call(ctx context.Context, tool string, args json.RawMessage) (*mcp.CallToolResult, error) {
	cs, err := s.sessionFor(ctx)
	if err != nil {
		return nil, &notSentError{err}
	}
	return s.c.bounded(ctx, func(ctx context.Context) (*mcp.CallToolResult, error) {
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args, Meta: telemetry.ToMeta(ctx)})
	}, func(err error) { s.dropIfBroken(cs, err) })
}

// due is false: an MCP server announces its changes (tools/list_changed).
func (s *session) due() bool { return false }

func (s *session) live() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cs != nil
}

// sessionFor returns the live session, connecting when there is none.
func (s *session) sessionFor(ctx context.Context) (*mcp.ClientSession, error) {
	s.mu.Lock()
	cs := s.cs
	s.mu.Unlock()
	if cs != nil {
		return cs, nil
	}
	if err := s.c.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.c.release()
	return s.sessionLocked(ctx)
}

// sessionLocked is sessionFor with c.lock held.
func (s *session) sessionLocked(ctx context.Context) (*mcp.ClientSession, error) {
	s.mu.Lock()
	cs, down := s.cs, s.down
	s.mu.Unlock()
	if down || s.c.pool.isClosed() {
		return nil, errPoolClosed
	}
	if cs != nil {
		return cs, nil
	}
	cs, proc, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.down { // shutdown raced with connect
		s.mu.Unlock()
		_ = cs.Close()
		return nil, errPoolClosed
	}
	s.cs, s.proc, s.started = cs, proc, true
	s.mu.Unlock()
	s.c.outdated() // the server may have changed while we were away
	s.c.pool.spawn(func() { s.watch(cs) })
	return cs, nil
}

// watch drops cs when its connection ends, so the next call reconnects.
func (s *session) watch(cs *mcp.ClientSession) {
	err := cs.Wait()
	s.drop(cs, err)
}

// drop forgets cs if it is still the live session, and closes it.
func (s *session) drop(cs *mcp.ClientSession, cause error) {
	s.mu.Lock()
	mine := s.cs == cs
	if mine {
		s.cs, s.proc = nil, nil
	}
	s.mu.Unlock()
	if mine {
		s.c.pool.logger.Info("upstream session ended", "server", s.c.srv.Name, "err", redactErr(cause))
	}
	_ = cs.Close()
}

// dropIfBroken drops cs unless err is the server's own JSON-RPC error answer: a session that
// failed any other way (ErrConnectionClosed, ErrSessionMissing, EOF from a crashed process, a
// broken stream) is not trusted with the next call, which reconnects instead. The drop happens
// before the failed call returns, so the very next call cannot pick the dead session up.
func (s *session) dropIfBroken(cs *mcp.ClientSession, err error) {
	var wire *jsonrpc.Error
	if errors.As(err, &wire) && !errors.Is(err, mcp.ErrConnectionClosed) && !errors.Is(err, mcp.ErrSessionMissing) {
		return
	}
	s.mu.Lock()
	if s.cs == cs {
		s.cs, s.proc = nil, nil
	}
	s.mu.Unlock()
	s.c.pool.spawn(func() { s.drop(cs, err) })
}

// shutdown closes the session for good, bounded: the go-sdk's Close waits for requests in
// flight, so after closeGrace the process is ended under it.
func (s *session) shutdown() {
	s.mu.Lock()
	s.down = true
	cs, proc, starting := s.cs, s.proc, s.starting
	s.cs, s.proc = nil, nil
	s.mu.Unlock()
	if starting != nil {
		// Still starting (a package downloading, say): nothing is waited for; its whole
		// tree ends now, so none of it outlives the session that started it.
		starting.kill()
		starting.close()
	}
	if cs == nil {
		return
	}
	done := make(chan struct{})
	go func() { _ = cs.Close(); close(done) }()
	select {
	case <-done:
		return
	case <-time.After(closeGrace):
	}
	if proc != nil {
		proc.close()
	}
	select {
	case <-done:
	case <-time.After(closeGrace):
		s.c.pool.logger.Warn("upstream session did not close in time; abandoned", "server", s.c.srv.Name)
	}
}

func (s *session) connect(ctx context.Context) (*mcp.ClientSession, *process, error) {
	srv, pool := s.c.srv, s.c.pool
	timeout := srv.connectTimeout()
	s.mu.Lock()
	first := srv.URL == "" && !s.started
	s.mu.Unlock()
	if first {
		timeout = srv.firstStartTimeout()
	}
	ctx, cancel := context.WithTimeoutCause(context.WithoutCancel(ctx), timeout, &startTimeoutError{after: timeout, first: first})
	defer cancel()
	impl := pool.opts.Implementation
	if impl == nil {
		impl = &mcp.Implementation{Name: "mcp-sandbox", Version: "dev"}
	}
	client := mcp.NewClient(impl, &mcp.ClientOptions{
		Logger:                 pool.logger.With("server", srv.Name),
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { s.c.announced() },
	})
	var sopts *mcp.ClientSessionOptions
	if srv.ProtocolVersion != "" {
		sopts = &mcp.ClientSessionOptions{ProtocolVersion: srv.ProtocolVersion}
	}
	if srv.URL != "" {
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
			Endpoint:     srv.URL,
			HTTPClient:   srv.httpClient(),
			MaxEventSize: srv.maxFrame(),
		}, sopts)
		if err != nil {
			return nil, nil, fmt.Errorf("connecting to %s: %w", srv.Name, err)
		}
		return cs, nil, nil
	}
	proc, err := startProcess(srv, pool.logger)
	if err != nil {
		return nil, nil, fmt.Errorf("starting %s: %w", srv.Name, err)
	}
	s.mu.Lock()
	if s.down { // shutdown came first: it will not see this one
		s.mu.Unlock()
		proc.kill()
		proc.close()
		return nil, nil, errPoolClosed
	}
	s.starting = proc
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.starting = nil
		s.mu.Unlock()
	}()
	if first {
		pool.logger.Info("upstream server starting for the first time", "server", srv.Name, "timeout", timeout.String())
	}
	wctx, wcancel := proc.watch(ctx, srv.Name, pool.logger)
	defer wcancel()
	cs, err := client.Connect(wctx, proc.transport(srv.maxFrame()), sopts)
	if err != nil {
		var timedOut *startTimeoutError
		switch cause := context.Cause(wctx); {
		case errors.As(cause, &timedOut):
			// Timed out, whatever the handshake saw after: the watch killed the tree, so the
			// server's end is ours and not an exit of its own.
			err = fmt.Errorf("%w (%w)", err, cause)
		case cause != nil && !errors.Is(cause, context.Canceled) && !errors.Is(cause, context.DeadlineExceeded):
			err = fmt.Errorf("%w (%w)", err, cause)
		case proc.exitedWithin(exitSettle):
			// The handshake saw the end of the server's stdout before the watch saw it exit.
			err = fmt.Errorf("%w (%w)", err, errProcessExited)
		}
		pool.spawn(proc.close)
		return nil, nil, fmt.Errorf("initializing %s: %w", srv.Name, err)
	}
	return cs, proc, nil
}
