package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
)

// PoolOptions configures a Pool. The zero value of every field but Servers is useful.
type PoolOptions struct {
	// Servers are the tenant's upstream servers; names must be distinct.
	Servers []Server
	// Logger receives connection events and the servers' stderr; nil means slog.Default().
	Logger *slog.Logger
	// OnToolsChanged, when set, is called (on its own goroutine, which Close waits for, up to
	// its grace period) after a server announces tools/list_changed, so the MCP face can tell
	// its hosts. The change is picked up by the next Catalogue call. It is not called once the
	// Pool is closed.
	OnToolsChanged func(server string)
	// Implementation names this client to upstream servers; nil means "mcp-sandbox".
	Implementation *mcp.Implementation
	// Shapes, when set, keeps the shapes observed of this tenant's results beyond the
	// process (docs/design.md §3.3): the Pool merges its samples into it, on a goroutine of
	// its own, and get_tool_info reads every replica's from it. Nil: kept in memory only.
	Shapes ShapeStore
}

// Pool holds one tenant's client sessions, one per upstream server, opened lazily. It is safe
// for concurrent use.
type Pool struct {
	logger *slog.Logger
	opts   PoolOptions
	conns  map[string]*conn
	order  []string

	// ctx ends when the Pool closes, ending the calls in flight.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// bg owns the goroutines that watch and drop sessions; Close waits for it, bounded.
	bg sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	cat     *Catalogue // last built; nil until the first Catalogue call
	version uint64     // bumped when any server's tool list changes
	catVer  uint64     // version cat was built at

	// observed are the shapes of this tenant's results (observed.go), for no other Pool.
	observed observations
}

// NewPool checks opts and returns a Pool. Nothing is started until a catalogue or a call
// needs a server.
func NewPool(options *PoolOptions) (*Pool, error) {
	var opts PoolOptions
	if options != nil {
		opts = *options
	}
	p := &Pool{logger: opts.Logger, opts: opts, conns: map[string]*conn{}}
	p.ctx, p.cancel = context.WithCancelCause(context.Background())
	if p.logger == nil {
		p.logger = slog.Default()
	}
	for _, s := range opts.Servers {
		if err := s.Validate(); err != nil {
			return nil, err
		}
		if _, dup := p.conns[s.Name]; dup {
			return nil, fmt.Errorf("upstream %q: named twice", s.Name)
		}
		c := &conn{srv: s, pool: p, lock: make(chan struct{}, 1)}
		if s.A2A {
			c.peer = newPeer(s, p.logger)
		}
		p.conns[s.Name] = c
		p.order = append(p.order, s.Name)
	}
	if opts.Shapes != nil {
		p.bg.Go(p.observed.startStore(opts.Shapes, p.logger))
	}
	return p, nil
}

// Close closes every session, each bounded (docs/design.md §13.6). It is idempotent; calls
// after Close fail with upstream_error.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.cancel(errPoolClosed)
	var wg sync.WaitGroup
	for _, c := range p.conns {
		wg.Add(1)
		go func() { defer wg.Done(); c.shutdown() }()
	}
	wg.Wait()
	if !p.observed.closeStore(closeGrace) {
		p.logger.Warn("observed result shapes still being merged into the ledger as the upstream pool closed")
	}
	done := make(chan struct{})
	go func() { p.bg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(closeGrace):
		p.logger.Warn("upstream pool closed with session watchers still running")
	}
	return nil
}

// spawn runs f on a goroutine that Close waits for. Once the Pool is closed (every session
// already closed by then) f runs unowned, since a WaitGroup must not grow while Close waits.
func (p *Pool) spawn(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		go f()
		return
	}
	p.bg.Go(f)
}

func (p *Pool) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

func (p *Pool) changed(server string) {
	p.mu.Lock()
	p.version++
	p.mu.Unlock()
	if p.opts.OnToolsChanged != nil && !p.isClosed() {
		p.spawn(func() { p.opts.OnToolsChanged(server) }) // Close waits for it
	}
}

// Catalogue returns the tools of every server, listing (all pages) each server not listed yet
// or announced changed since. A server that cannot be reached keeps its last known tools, or
// has none, and is named in Problems. It is meant to be called at every turn boundary: when
// nothing changed it costs a lock.
func (p *Pool) Catalogue(ctx context.Context) *Catalogue {
	cat, ver, ok := p.cached()
	if ok {
		return cat
	}
	var wg sync.WaitGroup
	for _, c := range p.conns {
		wg.Go(func() { c.refresh(ctx) })
	}
	wg.Wait()
	return p.build(ver)
}

// Current is the catalogue a host's tools/list shows: Catalogue, except that it waits at
// most wait for the listings it needs. A listing still under way then goes on in the
// background (owned by the Pool; Close ends it and kills a server still starting), and when
// it lands the Pool announces it as a change of that server's tools (OnToolsChanged), so the
// MCP face sends tools/list_changed. A server that takes a minute to start (a first `npx -y`
// downloading its package) never holds a host's listing: what is known is listed at once,
// with the starting server named in Problems (docs/design.md §13.6).
func (p *Pool) Current(ctx context.Context, wait time.Duration) *Catalogue {
	cat, ver, ok := p.cached()
	if ok {
		return cat
	}
	var (
		gaveUp atomic.Bool
		left   atomic.Int64
	)
	done := make(chan struct{})
	left.Store(int64(len(p.conns)))
	for _, c := range p.conns {
		p.spawn(func() {
			c.refreshLate(&gaveUp)
			if left.Add(-1) == 0 {
				close(done)
			}
		})
	}
	if len(p.conns) == 0 {
		close(done)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	case <-ctx.Done():
	}
	gaveUp.Store(true)
	return p.build(ver)
}

// cached returns the last catalogue when nothing changed since it was built, else the
// version a new one is built at.
func (p *Pool) cached() (*Catalogue, uint64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cat != nil && p.catVer == p.version && !p.anyUnlisted() {
		return p.cat, 0, true
	}
	return nil, p.version, false
}

// build makes the catalogue of what every server holds now, and keeps it when no server
// needs trying again and nothing changed since ver.
func (p *Pool) build(ver uint64) *Catalogue {
	var (
		tools  []*Tool
		failed bool
	)
	problems := map[string]string{}
	for _, name := range p.order {
		c := p.conns[name]
		ts, problem, bad := c.snapshot()
		tools = append(tools, ts...)
		if problem != "" {
			problems[name] = problem
		}
		failed = failed || bad
	}
	cat := newCatalogue(p, tools, problems)
	p.mu.Lock()
	if !failed && ver == p.version {
		p.cat, p.catVer = cat, ver
	} else {
		p.cat = nil // try the failed servers again next turn
	}
	p.mu.Unlock()
	return cat
}

// anyUnlisted reports whether some server has no listing yet. p.mu is held.
func (p *Pool) anyUnlisted() bool {
	for _, c := range p.conns {
		c.mu.Lock()
		listed := c.listed
		c.mu.Unlock()
		if !listed || c.peer.due() {
			return true
		}
	}
	return false
}

// conn is the Pool's link to one server.
type conn struct {
	srv  Server
	pool *Pool
	lock chan struct{} // held while connecting or listing; a channel so waiting honours ctx
	peer *peer         // an A2A peer's card and calls (a2a.go); nil for an MCP server

	mu      sync.Mutex
	session *mcp.ClientSession // nil when not connected
	proc    *process
	tools   []*Tool   // last listing
	notes   []string  // what the last listing's admission skipped or cut, safe to show a model
	listed  bool      // tools holds a listing
	stale   bool      // list_changed since the listing, or reconnected
	changes uint64    // list_changed notifications received, so one during a listing is not lost
	problem string    // why the last refresh failed, safe to show a model
	started bool      // a session was established once: later starts get the connect timeout
	retryAt time.Time // no listing attempt before this, after a failure
	// listings are the start times of the recent listings (at most relistBurst), and
	// throttled is set while a change announced since waits for room among them.
	listings  []time.Time
	throttled bool
	landed    uint64   // listings that succeeded, so a late one can be told apart
	starting  *process // a stdio server started and not yet initialized: Close kills it
	down      bool     // shut down for good
}

func (c *conn) acquire(ctx context.Context) error {
	select {
	case c.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *conn) release() { <-c.lock }

// snapshot returns the last listing, and what is wrong with it in one sentence: why the last
// refresh failed, a change not listed yet, what its admission cut. retry is true when a later
// turn must try again (a failure, or a re-listing held back).
func (c *conn) snapshot() (tools []*Tool, problem string, retry bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var all []string
	if c.problem != "" {
		all = append(all, c.problem)
	}
	if !c.listed && c.problem == "" { // only Current returns before the first listing
		all = append(all, "it is starting: its tools are listed when it answers")
		retry = true
	}
	if c.throttled {
		all = append(all, fmt.Sprintf("the server announced tool changes faster than this host re-lists (%d a minute); its list may be out of date", relistBurst))
	}
	all = append(all, c.notes...)
	return c.tools, strings.Join(all, "; "), retry || c.problem != "" || c.throttled
}

// Re-listing is bounded: a server announcing list_changed on every call must not make each
// turn re-read its whole listing. At most relistBurst listings per relistWindow.
const (
	relistBurst  = 10
	relistWindow = time.Minute
)

// refresh lists the server's tools when it has no listing or the listing is stale.
func (c *conn) refresh(ctx context.Context) {
	if err := c.acquire(ctx); err != nil {
		return
	}
	defer c.release()
	c.mu.Lock()
	now := time.Now()
	need := (!c.listed || c.stale || c.peer.due()) && !now.Before(c.retryAt)
	if need && c.listed && len(c.listings) == relistBurst && now.Sub(c.listings[0]) < relistWindow {
		need, c.throttled = false, true
	}
	if need {
		c.listings = append(c.listings, now)
		if len(c.listings) > relistBurst {
			c.listings = c.listings[1:]
		}
	}
	changes := c.changes
	c.mu.Unlock()
	if !need {
		return
	}
	l, err := c.list(ctx)
	if err == nil {
		tools, notes := admit(c.srv, l, c.pool.logger)
		c.mu.Lock()
		c.tools, c.notes, c.listed, c.problem, c.retryAt, c.throttled = tools, notes, true, "", time.Time{}, false
		c.stale = c.changes != changes
		c.landed++
		c.mu.Unlock()
		return
	}
	c.pool.logger.Warn("upstream tools/list failed", "server", c.srv.Name, "err", redactErr(err))
	c.mu.Lock()
	c.problem = fmt.Sprintf("upstream server %q is unavailable: %s", c.srv.Name, reasonOf(c.srv, err))
	c.retryAt = time.Now().Add(retryDelay)
	c.mu.Unlock()
}

// refreshLate is refresh for Current, on the Pool's context: when a listing lands after
// Current stopped waiting (gaveUp), the Pool announces it as a change.
func (c *conn) refreshLate(gaveUp *atomic.Bool) {
	c.mu.Lock()
	before := c.landed
	c.mu.Unlock()
	c.refresh(c.pool.ctx)
	c.mu.Lock()
	landed := c.landed != before
	c.mu.Unlock()
	if landed && gaveUp.Load() {
		c.pool.changed(c.srv.Name)
	}
}

// list returns the server's listing: an A2A peer's skills from its card, an MCP server's
// tools from tools/list on its session (connecting if need be; a broken session is dropped).
func (c *conn) list(ctx context.Context) (listing, error) {
	if c.peer != nil {
		return c.peer.list(ctx)
	}
	cs, err := c.sessionLocked(ctx)
	if err != nil {
		return listing{}, err
	}
	l, err := c.listAll(ctx, cs)
	if err != nil {
		c.dropIfBroken(cs, err)
	}
	return l, err
}

// listAll reads every page of tools/list, up to maxListPages pages and maxListBytes of tool
// definitions: a listing past either keeps what it read and says where it stopped.
func (c *conn) listAll(ctx context.Context, cs *mcp.ClientSession) (listing, error) {
	ctx, cancel := context.WithTimeout(ctx, c.srv.callTimeout())
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

// session returns the live session, connecting when there is none.
func (c *conn) sessionFor(ctx context.Context) (*mcp.ClientSession, error) {
	c.mu.Lock()
	cs := c.session
	c.mu.Unlock()
	if cs != nil {
		return cs, nil
	}
	if err := c.acquire(ctx); err != nil {
		return nil, err
	}
	defer c.release()
	return c.sessionLocked(ctx)
}

// sessionLocked is session with c.lock held.
func (c *conn) sessionLocked(ctx context.Context) (*mcp.ClientSession, error) {
	c.mu.Lock()
	cs, down := c.session, c.down
	c.mu.Unlock()
	if down || c.pool.isClosed() {
		return nil, errPoolClosed
	}
	if cs != nil {
		return cs, nil
	}
	cs, proc, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.down { // Close raced with connect
		c.mu.Unlock()
		_ = cs.Close()
		return nil, errPoolClosed
	}
	c.session, c.proc, c.started = cs, proc, true
	relist := c.listed
	if relist {
		c.stale = true // the server may have changed while we were away
	}
	c.mu.Unlock()
	if relist {
		c.pool.invalidate()
	}
	c.pool.spawn(func() { c.watch(cs) })
	return cs, nil
}

// watch drops cs when its connection ends, so the next call reconnects.
func (c *conn) watch(cs *mcp.ClientSession) {
	err := cs.Wait()
	c.drop(cs, err)
}

// drop forgets cs if it is still the live session, and closes it.
func (c *conn) drop(cs *mcp.ClientSession, cause error) {
	c.mu.Lock()
	mine := c.session == cs
	if mine {
		c.session, c.proc = nil, nil
	}
	c.mu.Unlock()
	if mine {
		c.pool.logger.Info("upstream session ended", "server", c.srv.Name, "err", redactErr(cause))
	}
	_ = cs.Close()
}

// dropIfBroken drops cs unless err is the server's own JSON-RPC error answer: a session that
// failed any other way (ErrConnectionClosed, ErrSessionMissing, EOF from a crashed process, a
// broken stream) is not trusted with the next call, which reconnects instead. The drop happens
// before the failed call returns, so the very next call cannot pick the dead session up.
func (c *conn) dropIfBroken(cs *mcp.ClientSession, err error) {
	var wire *jsonrpc.Error
	if errors.As(err, &wire) && !errors.Is(err, mcp.ErrConnectionClosed) && !errors.Is(err, mcp.ErrSessionMissing) {
		return
	}
	c.mu.Lock()
	if c.session == cs {
		c.session, c.proc = nil, nil
	}
	c.mu.Unlock()
	c.pool.spawn(func() { c.drop(cs, err) })
}

// shutdown closes the session for good, bounded: the go-sdk's Close waits for requests in
// flight, so after closeGrace the process is ended under it.
func (c *conn) shutdown() {
	c.mu.Lock()
	c.down = true
	cs, proc, starting := c.session, c.proc, c.starting
	c.session, c.proc = nil, nil
	c.mu.Unlock()
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
		c.pool.logger.Warn("upstream session did not close in time; abandoned", "server", c.srv.Name)
	}
}

func (c *conn) connect(ctx context.Context) (*mcp.ClientSession, *process, error) {
	timeout := c.srv.connectTimeout()
	c.mu.Lock()
	first := c.srv.URL == "" && !c.started
	c.mu.Unlock()
	if first {
		timeout = c.srv.firstStartTimeout()
	}
	ctx, cancel := context.WithTimeoutCause(context.WithoutCancel(ctx), timeout, &startTimeoutError{after: timeout, first: first})
	defer cancel()
	impl := c.pool.opts.Implementation
	if impl == nil {
		impl = &mcp.Implementation{Name: "mcp-sandbox", Version: "dev"}
	}
	client := mcp.NewClient(impl, &mcp.ClientOptions{
		Logger: c.pool.logger.With("server", c.srv.Name),
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			c.mu.Lock()
			c.stale = true
			c.changes++
			c.mu.Unlock()
			c.pool.changed(c.srv.Name)
		},
	})
	var sopts *mcp.ClientSessionOptions
	if c.srv.ProtocolVersion != "" {
		sopts = &mcp.ClientSessionOptions{ProtocolVersion: c.srv.ProtocolVersion}
	}
	if c.srv.URL != "" {
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
			Endpoint:     c.srv.URL,
			HTTPClient:   c.srv.httpClient(),
			MaxEventSize: c.srv.maxFrame(),
		}, sopts)
		if err != nil {
			return nil, nil, fmt.Errorf("connecting to %s: %w", c.srv.Name, err)
		}
		return cs, nil, nil
	}
	proc, err := startProcess(c.srv, c.pool.logger)
	if err != nil {
		return nil, nil, fmt.Errorf("starting %s: %w", c.srv.Name, err)
	}
	c.mu.Lock()
	if c.down { // Close came first: it will not see this one
		c.mu.Unlock()
		proc.kill()
		proc.close()
		return nil, nil, errPoolClosed
	}
	c.starting = proc
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.starting = nil
		c.mu.Unlock()
	}()
	if first {
		c.pool.logger.Info("upstream server starting for the first time", "server", c.srv.Name, "timeout", timeout.String())
	}
	wctx, wcancel := proc.watch(ctx, c.srv.Name, c.pool.logger)
	defer wcancel()
	cs, err := client.Connect(wctx, proc.transport(c.srv.maxFrame()), sopts)
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
		c.pool.spawn(proc.close)
		return nil, nil, fmt.Errorf("initializing %s: %w", c.srv.Name, err)
	}
	return cs, proc, nil
}

// call makes one tools/call (an A2A peer: one message/send) with the server's timeout. The
// caller classifies the error.
func (c *conn) call(ctx context.Context, tool string, args json.RawMessage) (*mcp.CallToolResult, error) {
	var cs *mcp.ClientSession
	if c.peer == nil {
		var err error
		if cs, err = c.sessionFor(ctx); err != nil {
			return nil, &notSentError{err}
		}
	} else if c.pool.isClosed() {
		return nil, &notSentError{errPoolClosed}
	}
	ctx, cancel := context.WithTimeoutCause(ctx, c.srv.callTimeout(), errCallTimeout)
	defer cancel()
	ctx, cancelCause := context.WithCancelCause(ctx)
	defer cancelCause(nil)
	stop := context.AfterFunc(c.pool.ctx, func() { cancelCause(errPoolClosed) })
	defer stop()
	var res *mcp.CallToolResult
	var err error
	if c.peer != nil {
		res, err = c.peer.call(ctx, tool, args)
	} else {
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args, Meta: telemetry.ToMeta(ctx)})
	}
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			return nil, cause
		}
		c.failed(cs, err)
	}
	return res, err
}

// failed forgets what a call's failure makes untrustworthy: a broken session (dropIfBroken),
// or an A2A peer's card, read again at the next turn since the peer may have changed.
func (c *conn) failed(cs *mcp.ClientSession, err error) {
	if c.peer == nil {
		c.dropIfBroken(cs, err)
		return
	}
	c.mu.Lock()
	c.stale = true
	c.mu.Unlock()
	c.pool.invalidate()
}

var (
	errCallTimeout = errors.New("upstream call timed out")
	errPoolClosed  = errors.New("the upstream pool is closed")
)

// retryDelay is how long a server that could not be listed is left alone before a turn tries
// it again, so a dead server does not slow every turn by its connect timeout.
const retryDelay = 10 * time.Second

func (p *Pool) invalidate() {
	p.mu.Lock()
	p.version++
	p.mu.Unlock()
}

// notSentError wraps why a call never reached its server (no session could be had).
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

// redactErr returns err for a log line with the URL of a *url.Error cleaned (cleanURL: no
// userinfo, query or fragment, which may carry a secret). A nil err stays nil.
func redactErr(err error) error {
	if err == nil {
		return nil
	}
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	clean, ok := cleanURL(ue.URL)
	if !ok {
		clean = "<url>"
	}
	return errors.New(strings.ReplaceAll(err.Error(), ue.URL, clean))
}

// reasonOf says, in words safe to show a model (no path, address or credential), why a server
// could not be connected to or listed. The whole error goes to the operator's log.
func reasonOf(s Server, err error) string {
	var (
		op       *net.OpError
		timedOut *startTimeoutError
		cred     *CredentialError
	)
	switch {
	case errors.As(err, &cred) && cred.Reason != "":
		return "its credential is not available: " + cred.Reason
	case errors.As(err, &timedOut) && timedOut.first:
		return fmt.Sprintf("it timed out while starting: no answer to initialize within %s of its first start (which may be downloading its package); it was stopped, and is tried again at a later turn", timedOut.after)
	case errors.As(err, &timedOut):
		return fmt.Sprintf("it timed out while starting: no answer to initialize within %s; it was stopped", timedOut.after)
	case errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist):
		return "its command was not found"
	case errors.Is(err, fs.ErrPermission):
		return "its command could not be run (permission denied)"
	case errors.Is(err, errProcessExited):
		return "it exited while starting"
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("it did not answer within %s", s.connectTimeout())
	case errors.As(err, &op):
		return "it could not be reached"
	case errors.Is(err, errPoolClosed):
		return "the server is shutting down"
	case s.URL != "" && strings.HasPrefix(err.Error(), "connecting to "):
		return "connecting to it failed"
	case strings.HasPrefix(err.Error(), "initializing "):
		return "it did not complete the MCP handshake"
	}
	return "its tools could not be listed"
}
