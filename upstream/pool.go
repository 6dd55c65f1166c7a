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

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/toolshape"
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
			c.link = newPeer(c)
		} else {
			c.link = &session{c: c}
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
		go func() { defer wg.Done(); c.link.shutdown() }()
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
		if !listed || c.link.due() {
			return true
		}
	}
	return false
}

// conn is the Pool's link to one server: what its listing holds and why it may be out of
// date, and the link that reaches the server.
type conn struct {
	srv  Server
	pool *Pool
	lock chan struct{} // held while connecting or listing; a channel so waiting honours ctx
	link link          // an MCP client session (session.go) or an A2A peer (a2a.go)

	mu      sync.Mutex
	tools   []*Tool   // last listing
	notes   []string  // what the last listing's admission skipped or cut, safe to show a model
	listed  bool      // tools holds a listing
	stale   bool      // list_changed since the listing, or reconnected
	changes uint64    // list_changed notifications received, so one during a listing is not lost
	problem string    // why the last refresh failed, safe to show a model
	retryAt time.Time // no listing attempt before this, after a failure
	// listings are the start times of the recent listings (at most relistBurst), and
	// throttled is set while a change announced since waits for room among them.
	listings  []time.Time
	throttled bool
	landed    uint64 // listings that succeeded, so a late one can be told apart
}

// link is how a conn reaches its server: an MCP client session (session.go) or an A2A peer
// (a2a.go). The conn keeps what is the same for both: the listing, what is wrong with it, and
// when to read it again. A link is safe for concurrent use; its own mutex is a leaf.
type link interface {
	// list reads the server's tool definitions, connecting first if need be. c.lock is held.
	list(ctx context.Context) (listing, error)
	// call makes one call of tool (conn.bounded gives it the server's timeout). A failure
	// before the server could have seen the call is a *notSentError; the link forgets, before
	// it returns, what a failure makes untrustworthy (a broken session, a peer's card).
	call(ctx context.Context, tool string, args json.RawMessage) (*mcp.CallToolResult, error)
	// due reports whether the listing is to be read again although no change was announced.
	due() bool
	// live reports whether the link holds a session now (the operator's view).
	live() bool
	// shutdown ends the link for good, bounded by closeGrace; calls after it fail.
	shutdown()
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
	need := (!c.listed || c.stale || c.link.due()) && !now.Before(c.retryAt)
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
	l, err := c.link.list(ctx)
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

// announced notes a change the server announced (MCP's tools/list_changed): the next turn
// lists it again, and the Pool tells its hosts.
func (c *conn) announced() {
	c.mu.Lock()
	c.stale = true
	c.changes++
	c.mu.Unlock()
	c.pool.changed(c.srv.Name)
}

// outdated marks the listing out of date without a change announced: the server may have
// changed while a session was away, or a peer's card may have after a call failed in transport.
// Only a listing already held is marked; the Pool's catalogue is built anew at the next turn.
func (c *conn) outdated() {
	c.mu.Lock()
	had := c.listed
	c.stale = c.stale || had
	c.mu.Unlock()
	if had {
		c.pool.invalidate()
	}
}

// bounded makes one call through call with the server's call timeout, ended too when the Pool
// closes. When ctx ended first, the error is why (errCallTimeout, errPoolClosed, the caller's
// cause); any other failure is also handed to failed, for the link to forget what it makes
// untrustworthy.
func (c *conn) bounded(ctx context.Context, call func(context.Context) (*mcp.CallToolResult, error), failed func(error)) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, c.srv.callTimeout(), errCallTimeout)
	defer cancel()
	ctx, cancelCause := context.WithCancelCause(ctx)
	defer cancelCause(nil)
	stop := context.AfterFunc(c.pool.ctx, func() { cancelCause(errPoolClosed) })
	defer stop()
	res, err := call(ctx)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			return nil, cause
		}
		failed(err)
	}
	return res, err
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

// redactErr returns err for a log line with the URL of a *url.Error cleaned (toolshape.CleanURL: no
// userinfo, query or fragment, which may carry a secret). A nil err stays nil.
func redactErr(err error) error {
	if err == nil {
		return nil
	}
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	clean, ok := toolshape.CleanURL(ue.URL)
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
