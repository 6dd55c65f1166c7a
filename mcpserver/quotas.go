package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// Quota is what one tenant, or the whole server, may hold at once in this process. A zero
// count sets no bound.
type Quota struct {
	// MaxExecutions is how many run_code programs run at once.
	MaxExecutions int
	// Wait is how long a run_code waits for a slot, the tenant's and then the server's,
	// before it is refused with capacity_exceeded; 0 refuses at once. A tenant's applies; the
	// server's is not used.
	Wait time.Duration
	// MaxSessions is how many MCP sessions are held at once over HTTP: 2025-11-25 sessions,
	// from the request that makes one until it ends, and 2026-07-28 requests, each a session
	// for as long as it is in flight.
	MaxSessions int
}

// Load is what a tenant, or the server, holds now: programs running and waiting for a slot,
// and sessions open.
type Load struct {
	Running, Queued, Sessions int
}

// Quotas admits executions and sessions against each tenant's Quota and the server's. One
// Quotas is shared by every agent's server of a process (Options.Quotas); nil admits
// everything. It is safe for concurrent use.
//
// Executions: a run_code takes one of its tenant's slots, then one of the server's, waiting
// for each in arrival order (channel senders are served first come, first served) until the
// tenant's Wait has passed since it arrived. A tenant first takes its own slot, so at most
// MaxExecutions of one tenant ever wait for the server's: a busy tenant cannot stand in front
// of every other tenant's programs. How many wait is not bounded here: each waiter is a
// request the listener's connection caps (or a stdio host, one user) already bound.
//
// Sessions: a request that makes a session is admitted only while its tenant and the server
// are below MaxSessions, counting the sessions admitted that have not ended and the
// admissions in flight; at the limit it waits a moment (sessionGrace) for a place to be
// given back before it is refused. An ended session (closed by its client, by the idle timeout or by a
// drain) is noticed when the count reaches a limit, by asking the session's server which of
// them are still open: there is no goroutine per session to own.
type Quotas struct {
	server  Quota
	tenants map[string]Quota // read-only after NewQuotas
	other   Quota            // a tenant tenants does not name

	serverSlots *slots // nil: no bound

	mu       sync.Mutex // guards the counts and state; never held while waiting for a slot
	state    map[string]*tenantLoad
	running  int // programs holding their slots, every tenant together
	queued   int // programs waiting for a slot
	sessions int // admitted (not known to have ended) + admitting, every tenant together
	// freed is closed (and replaced) whenever a session's place is given back.
	freed chan struct{}
}

type tenantLoad struct {
	slots           *slots                 // nil: no bound
	running, queued int                    // the tenant's share of Quotas' counts
	admitted        map[string]*mcp.Server // a live (or not yet pruned) session's id → its server
	inFlight        int                    // requests making a session, and sessionless requests, now
}

// NewQuotas returns the admission for a server with the given quota and per-tenant quotas;
// other applies to a tenant that tenants does not name.
func NewQuotas(server Quota, tenants map[string]Quota, other Quota) *Quotas {
	q := &Quotas{server: server, tenants: map[string]Quota{}, other: other, state: map[string]*tenantLoad{}, freed: make(chan struct{})}
	for t, x := range tenants {
		q.tenants[t] = x
	}
	if server.MaxExecutions > 0 {
		q.serverSlots = newSlots(server.MaxExecutions)
	}
	return q
}

// QuotaOf returns the quota that applies to tenant.
func (q *Quotas) QuotaOf(tenant string) Quota {
	if x, ok := q.tenants[tenant]; ok {
		return x
	}
	return q.other
}

// tenant returns tenant's state, made on first use. Called with mu held.
func (q *Quotas) tenant(tenant string) *tenantLoad {
	t := q.state[tenant]
	if t == nil {
		t = &tenantLoad{admitted: map[string]*mcp.Server{}}
		if n := q.QuotaOf(tenant).MaxExecutions; n > 0 {
			t.slots = newSlots(n)
		}
		q.state[tenant] = t
	}
	return t
}

// Load returns what tenant holds now, or, for "", the whole server. Sessions that ended are
// no longer counted.
func (q *Quotas) Load(tenant string) Load {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pruneAll()
	if tenant == "" {
		return Load{Running: q.running, Queued: q.queued, Sessions: q.sessions}
	}
	t := q.tenant(tenant)
	return Load{Running: t.running, Queued: t.queued, Sessions: len(t.admitted) + t.inFlight}
}

// Tenants returns the tenants the server has seen, sorted: those Load can report on besides
// the configured ones.
func (q *Quotas) Tenants() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for t := range q.state {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// startExecution takes a slot for one of tenant's programs, waiting as the tenant's quota
// allows. It returns the slot's release, or the failure to answer with: capacity_exceeded
// (nothing ran), or cancelled when ctx ended while it waited.
func (q *Quotas) startExecution(ctx context.Context, tenant string) (release func(), _ *engine.Failure) {
	if q == nil {
		return func() {}, nil
	}
	quota := q.QuotaOf(tenant)
	q.mu.Lock()
	t := q.tenant(tenant)
	t.queued++
	q.queued++
	q.mu.Unlock()
	timer := time.NewTimer(quota.Wait)
	defer timer.Stop()
	fail := func(err error, full string) *engine.Failure {
		q.mu.Lock()
		t.queued--
		q.queued--
		q.mu.Unlock()
		return q.refusal(err, full, quota.Wait)
	}
	if err := t.slots.take(ctx, timer.C); err != nil {
		return nil, fail(err, fmt.Sprintf("tenant %q has its limit of %d programs running at once (max_concurrent_executions)", tenant, quota.MaxExecutions))
	}
	if err := q.serverSlots.take(ctx, timer.C); err != nil {
		t.slots.give()
		return nil, fail(err, fmt.Sprintf("the server has its limit of %d programs running at once, every tenant's together", q.server.MaxExecutions))
	}
	q.mu.Lock()
	t.queued--
	q.queued--
	t.running++
	q.running++
	q.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			q.serverSlots.give()
			t.slots.give()
			q.mu.Lock()
			t.running--
			q.running--
			q.mu.Unlock()
		})
	}, nil
}

func (q *Quotas) refusal(err error, full string, wait time.Duration) *engine.Failure {
	if !errors.Is(err, errFull) {
		return &engine.Failure{Kind: failure.Cancelled, Message: "cancelled while waiting for a free execution slot; nothing ran"}
	}
	waited := fmt.Sprintf("and none ended within %s", wait)
	if wait <= 0 {
		waited = "and this tenant does not wait for a slot (queue_seconds: 0)"
	}
	return &engine.Failure{Kind: failure.CapacityExceeded,
		Message: fmt.Sprintf("%s, %s; nothing ran. Retry when a program has finished, or do more in one program", full, waited)}
}

// sessionGate wraps the handler of one agent's server: a request that makes a session (a
// 2025-11-25 POST without Mcp-Session-Id, or any 2026-07-28 POST, whose session lasts as long
// as the request) is admitted only within its tenant's and the server's MaxSessions, and
// otherwise refused before go-sdk sees it: 429 for the tenant's limit, 503 for the server's,
// each saying which and what to do (idle is the session idle timeout, which it names).
func (q *Quotas) sessionGate(srv *mcp.Server, idle time.Duration, next http.Handler) http.Handler {
	if q == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stateless := sessionless(r)
		if r.Method != http.MethodPost || !stateless && r.Header.Get(headerSessionID) != "" {
			next.ServeHTTP(w, r)
			return
		}
		tenant := tenantOf(r)
		if status, why := q.awaitSession(r.Context(), tenant, idle); status != 0 {
			w.Header().Set("Retry-After", "5")
			http.Error(w, "mcp-sandbox: "+why, status)
			return
		}
		id := ""
		defer func() { q.sessionMade(tenant, srv, id) }()
		next.ServeHTTP(w, r)
		if !stateless {
			id = w.Header().Get(headerSessionID)
		}
	})
}

// headerSessionID is the header a 2025-11-25 session is named by.
const headerSessionID = "Mcp-Session-Id"

// sessionGrace is how long a session-making request waits for room before it is refused: a
// client sees its previous request answered a moment before that request's handler has
// returned and given its place back, and its next request must not be refused for that.
const sessionGrace = time.Second

// awaitSession admits one session-making request of tenant as openSession does, waiting up to
// sessionGrace (or until ctx ends) for a place to be given back.
func (q *Quotas) awaitSession(ctx context.Context, tenant string, idle time.Duration) (status int, why string) {
	deadline := time.NewTimer(sessionGrace)
	defer deadline.Stop()
	for {
		q.mu.Lock()
		status, why = q.openSession(tenant, idle)
		freed := q.freed
		q.mu.Unlock()
		if status == 0 {
			return 0, ""
		}
		select {
		case <-freed:
		case <-deadline.C:
			return status, why
		case <-ctx.Done():
			return status, why
		}
	}
}

// openSession admits one session-making request of tenant, or says why not (an HTTP status
// and the text). Called with mu held.
func (q *Quotas) openSession(tenant string, idle time.Duration) (status int, why string) {
	t := q.tenant(tenant)
	limit := q.QuotaOf(tenant).MaxSessions
	if limit > 0 && len(t.admitted)+t.inFlight >= limit {
		q.prune(t)
		if len(t.admitted)+t.inFlight >= limit {
			return http.StatusTooManyRequests, fmt.Sprintf("tenant %q holds its limit of %d sessions (max_sessions; requests of the sessionless revision in flight count as sessions); "+
				"end sessions it no longer uses (HTTP DELETE, or closing the client), or wait for idle ones to expire after %s", tenant, limit, idle)
		}
	}
	if max := q.server.MaxSessions; max > 0 && q.sessions >= max {
		q.pruneAll()
		if q.sessions >= max {
			return http.StatusServiceUnavailable, fmt.Sprintf("the server holds its limit of %d sessions, every tenant's together; retry later", max)
		}
	}
	t.inFlight++
	q.sessions++
	return 0, ""
}

// sessionMade ends the admission of a session-making request: the session it made (id, of
// srv) is counted from now on while it stays open; without one, its place is given back.
func (q *Quotas) sessionMade(tenant string, srv *mcp.Server, id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	t := q.tenant(tenant)
	t.inFlight--
	if id != "" && open(srv, id) {
		if _, dup := t.admitted[id]; !dup {
			t.admitted[id] = srv
			return
		}
	}
	q.sessions--
	q.free()
}

// free wakes the requests waiting for a session's place. Called with mu held.
func (q *Quotas) free() {
	close(q.freed)
	q.freed = make(chan struct{})
}

func open(srv *mcp.Server, id string) bool {
	for ss := range srv.Sessions() {
		if ss.ID() == id {
			return true
		}
	}
	return false
}

// prune forgets t's sessions that have ended. Called with mu held.
func (q *Quotas) prune(t *tenantLoad) {
	live := map[*mcp.Server]map[string]bool{}
	for id, srv := range t.admitted {
		ids, ok := live[srv]
		if !ok {
			ids = map[string]bool{}
			for ss := range srv.Sessions() {
				ids[ss.ID()] = true
			}
			live[srv] = ids
		}
		if !ids[id] {
			delete(t.admitted, id)
			q.sessions--
			q.free()
		}
	}
}

func (q *Quotas) pruneAll() {
	for _, t := range q.state {
		q.prune(t)
	}
}

// slots is a counting semaphore whose waiters are served in arrival order. A nil *slots has
// room for everyone.
type slots struct{ ch chan struct{} }

func newSlots(n int) *slots { return &slots{ch: make(chan struct{}, n)} }

// errFull is take's answer when the wait ran out.
var errFull = errors.New("every slot is taken")

// take takes a slot, waiting until one frees, expired fires (errFull) or ctx ends (its error).
// A slot free at once is taken even when expired has already fired.
func (s *slots) take(ctx context.Context, expired <-chan time.Time) error {
	if s == nil {
		return nil
	}
	select {
	case s.ch <- struct{}{}:
		return nil
	default:
	}
	select {
	case s.ch <- struct{}{}:
		return nil
	case <-expired:
		return errFull
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *slots) give() {
	if s != nil {
		<-s.ch
	}
}
