package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

// DefaultPoll is how often a Room looks in its store for what another process did to the
// questions waiting here (RoomOptions.Poll).
const DefaultPoll = time.Second

// writeTimeout bounds a pause's records written after the wait's context ended.
const writeTimeout = 10 * time.Second

// Why a question was withdrawn from its Asker once decided (context.Cause of its context).
var (
	// ErrAnswered: the person answered through the question's own client.
	ErrAnswered = errors.New("approval: answered through the question's own client")
	// ErrAnsweredElsewhere: an operator answered, or a client's retry that reached another
	// process; a held call's client hears what the call comes to through the store (Relay).
	ErrAnsweredElsewhere = errors.New("approval: answered on another path")
	// ErrClaimedElsewhere: another process took the answer to carry the call on (it found
	// this process's ledger owner gone): the call holding the question must stop, so it is
	// never made twice.
	ErrClaimedElsewhere = errors.New("approval: another process carries the call on")
)

// RoomOptions configure NewRoom; nil means defaults.
type RoomOptions struct {
	// Poll is how often the store is read for what other processes did; zero means
	// DefaultPoll.
	Poll time.Duration
	// Notify, when set, hears of each question kept as a pause, once, after it is saved
	// (a Webhook's Notify). It must not block.
	Notify func(Entry)
	// Logger receives what the operator must know; nil means slog.Default().
	Logger *slog.Logger
}

// Room is where a process's questions wait: each is a pause row in the store, its one state,
// and has one waiter here (the call's approval step, or a retry awaiting what another process
// relays). An answer from any path ends the wait: through the question's Asker, a client's
// retry (Answer), an operator (Decide here; another process's through the store), or the
// wait's end. One poller per Room reads the store while anything waits, for what other
// processes did. Safe for concurrent use.
type Room struct {
	store  budget.Pauses
	local  bool          // the store is this Room's memory: nothing outside this process changes it
	every  time.Duration // how often the poller looks
	notify func(Entry)
	log    *slog.Logger

	mu      sync.Mutex // guards waiting and polling
	waiting map[string]*waiter
	polling *poller // while anything waits in a Room over a shared store
}

// poller is a Room's one poller: stop ends it, and it closes stopped as it returns, which the
// waiter that stopped it waits for.
type poller struct {
	stop, stopped chan struct{}
}

// NewRoom returns a Room keeping its questions in store (the run ledger's pauses, which other
// processes share); nil keeps them in this process's memory.
func NewRoom(store budget.Pauses, opts *RoomOptions) *Room {
	var o RoomOptions
	if opts != nil {
		o = *opts
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	r := &Room{store: store, every: o.Poll, notify: o.Notify, log: o.Logger, waiting: map[string]*waiter{}}
	if store == nil {
		r.store, r.local = newMemory(), true
	}
	return r
}

// waiter is the one waiter of a question in this process.
type waiter struct {
	refs int // goroutines waiting on it; guarded by Room.mu
	// changed is closed, and replaced, when the question's row may have changed.
	changed chan struct{}
	// answers carry the answers of the question's own client to the approval step waiting
	// on it, which records them, until asked is closed (its wait ended); both nil for a
	// waiter that only awaits a row (Await).
	answers chan answered
	asked   chan struct{}
}

// answered is an answer handed to a question's waiter, and where it says how recording it
// went.
type answered struct {
	ans   Answer
	reply chan<- recorded
}

type recorded struct {
	p   budget.Pause
	err error
}

// wait registers a waiter of id (the approval step's when asking) and returns it with the
// function that unregisters it.
func (r *Room) wait(id string, asking bool) (*waiter, func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.waiting[id]
	if w == nil {
		w = &waiter{changed: make(chan struct{})}
		r.waiting[id] = w
	}
	if asking {
		w.answers, w.asked = make(chan answered), make(chan struct{})
	}
	w.refs++
	if !r.local && r.polling == nil {
		r.polling = &poller{stop: make(chan struct{}), stopped: make(chan struct{})}
		go r.poll(r.polling)
	}
	return w, func() {
		r.mu.Lock()
		if asking {
			close(w.asked)
			w.answers, w.asked = nil, nil
		}
		if w.refs--; w.refs == 0 {
			delete(r.waiting, id)
		}
		var stopped *poller
		if len(r.waiting) == 0 && r.polling != nil {
			stopped, r.polling = r.polling, nil
			close(stopped.stop)
		}
		r.mu.Unlock()
		if stopped != nil {
			<-stopped.stopped // the last waiter owns the poller's end
		}
	}
}

// changes is what w's next change closes.
func (r *Room) changes(w *waiter) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return w.changed
}

// poke tells id's waiter, if any, that its row may have changed; with id "" every waiter.
func (r *Room) poke(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, w := range r.waiting {
		if id == "" || k == id {
			close(w.changed)
			w.changed = make(chan struct{})
		}
	}
}

// poll pokes every waiter each Poll until p stops: each reads its own row.
func (r *Room) poll(p *poller) {
	defer close(p.stopped)
	t := time.NewTicker(r.every)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			r.poke("")
		}
	}
}

// put keeps q as a pause of a's and waits for its first answer: through a's Asker, the
// client's retry (Answer), an operator (Decide, or the store), until ctx ends. The answer
// is returned once this process has claimed it to carry the call on. A question that lapsed
// is dropped, and so is one no other process could carry on; a resumable one whose wait was
// cancelled (the request, or this process stopping) is kept for a retry or an operator until
// it expires.
func (r *Room) put(ctx context.Context, a *Asking, q Question) (Answer, error) {
	p, err := r.keep(ctx, a, &q)
	if err != nil {
		return Answer{}, err
	}
	x := r.ask(ctx, a.Asker, q)
	why := x.wait(ctx)
	why, claimErr := x.end(ctx, why)
	return x.settle(ctx, p, why, claimErr)
}

// keep saves q (its ID and Expires set here) as a pause of a's, and tells the operator.
func (r *Room) keep(ctx context.Context, a *Asking, q *Question) (budget.Pause, error) {
	q.ID, q.Expires = budget.NewID("q_"), expiry(ctx, q.Wait)
	p := budget.Pause{ID: q.ID, Tenant: a.Tenant, Agent: a.Agent, Run: a.Run, Hold: a.Hold, Tool: q.Tool, Arguments: q.Redacted,
		View: q.Arguments, Reason: strings.Join(q.Reasons, "; "), Seq: q.Seq, AskedAt: time.Now(), Expires: q.Expires,
		Resumable: a.Hold != ""}
	if a.Journal != nil {
		var inOrder bool
		p.Journal, inOrder = a.Journal.Paused(q.Seq)
		p.Resumable = p.Resumable && inOrder
	}
	if err := r.store.SavePause(ctx, p); err != nil {
		return p, fmt.Errorf("the question could not be kept: %w", err)
	}
	if r.notify != nil {
		p.Status = budget.ApprovalPending
		r.notify(EntryOf(p))
	}
	return p, nil
}

// asking is one question put: its waiter here, and its Asker's goroutine.
type asking struct {
	r        *Room
	q        Question
	w        *waiter
	answers  chan answered
	done     func() // unregisters w
	withdraw context.CancelCauseFunc
	got      chan reply // the Asker's return
	rep      reply
	returned bool // rep holds what the Asker returned
	// answering hears how the client's answer that ended the wait was recorded, once the
	// question is withdrawn: a retry is not shown the question it answered.
	answering chan<- recorded
	rec       recorded
}

type reply struct {
	ans Answer
	err error
}

// ask registers q's waiter and puts q to asker, on a goroutine end waits for.
func (r *Room) ask(ctx context.Context, asker Asker, q Question) *asking {
	x := &asking{r: r, q: q, got: make(chan reply, 1)}
	x.w, x.done = r.wait(q.ID, true)
	x.answers = x.w.answers
	actx, withdraw := context.WithCancelCause(ctx)
	x.withdraw = withdraw
	go func() {
		ans, err := asker.Ask(actx, q)
		x.got <- reply{ans, err}
	}()
	return x
}

// wait waits for what ends x's wait, and returns it: a decision's cause (ErrAnswered,
// ErrAnsweredElsewhere), or why no answer came.
func (x *asking) wait(ctx context.Context) (why error) {
	for why == nil {
		changed := x.r.changes(x.w)
		select {
		case x.rep = <-x.got:
			x.returned = true
			if why = x.rep.err; why == nil {
				rec := x.r.record(ctx, x.q.ID, x.rep.ans)
				if why = rec.cause(); why == nil {
					why = fmt.Errorf("the answer could not be recorded: %w", rec.err)
				}
			}
		case in := <-x.answers:
			x.rec = x.r.record(ctx, x.q.ID, in.ans)
			if why = x.rec.cause(); why == nil {
				in.reply <- x.rec // not recorded: the question stays open
			} else {
				x.answering = in.reply
			}
		case <-changed:
			if d, err := x.r.store.Pause(ctx, x.q.ID); err == nil && d.Status != budget.ApprovalPending {
				why = ErrAnsweredElsewhere
			}
		case <-ctx.Done():
			why = context.Cause(ctx)
		}
	}
	return why
}

// end claims a decided question for this process and withdraws it from its Asker with why
// (ErrClaimedElsewhere, when another process claimed it first), waits for the Asker, and
// tells the retry whose answer ended the wait.
func (x *asking) end(ctx context.Context, why error) (_ error, claimErr error) {
	x.done() // answers from here on are the store's
	if decided(why) {
		if claimErr = x.r.store.ClaimPause(context.WithoutCancel(ctx), x.q.ID); errors.Is(claimErr, budget.ErrAlreadyFinished) {
			why = ErrClaimedElsewhere
		}
	}
	x.withdraw(why)
	if !x.returned {
		x.rep = <-x.got
	}
	if x.answering != nil {
		x.answering <- x.rec
	}
	return why, claimErr
}

// decided reports whether why, what ended a wait, is a decision.
func decided(why error) bool {
	return errors.Is(why, ErrAnswered) || errors.Is(why, ErrAnsweredElsewhere)
}

// settle is the wait's outcome: the claimed pause's answer, or why there is none, the pause
// dropped unless a retry or an operator may still carry it on.
func (x *asking) settle(ctx context.Context, p budget.Pause, why, claimErr error) (Answer, error) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	switch {
	case !decided(why) && !errors.Is(why, ErrClaimedElsewhere):
		if errors.Is(ctx.Err(), context.DeadlineExceeded) || !p.Resumable {
			if err := x.r.store.DropPause(wctx, p.ID); err != nil {
				x.r.log.Warn("approval question not dropped from the store", "question", p.ID, "err", err)
			}
		}
		if x.rep.err != nil {
			return Answer{}, x.rep.err
		}
		return Answer{}, why
	case claimErr != nil:
		return Answer{}, fmt.Errorf("the answer to %s could not be claimed: %w", p.ID, claimErr)
	}
	d, err := x.r.store.Pause(wctx, p.ID)
	if err != nil {
		return Answer{}, fmt.Errorf("the answer to %s could not be read: %w", p.ID, err)
	}
	if errors.Is(why, ErrAnsweredElsewhere) {
		x.r.log.Info("approval answered on another path", "question", p.ID, "tool", p.Tool, "answer", d.Status, "by", d.AnsweredBy)
	}
	return AnswerOf(d), nil
}

// record is the answer of a question's own client recorded as its pause's: the first answer
// stands (an earlier one from another path, when there was one, is in the pause returned).
func (r *Room) record(ctx context.Context, id string, ans Answer) recorded {
	status, ok := ans.status()
	if !ok {
		return recorded{err: fmt.Errorf("the answer %q is not accept, decline or cancel", ans.Action)}
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	p, err := r.store.DecidePause(wctx, id, status, ans.By)
	return recorded{p: p, err: err}
}

// cause is why recording an answer ends the wait, or nil when it does not: an answer that
// could not be recorded leaves the question open.
func (rec recorded) cause() error {
	switch {
	case rec.err == nil:
		return ErrAnswered
	case errors.Is(rec.err, budget.ErrAlreadyFinished):
		return ErrAnsweredElsewhere
	}
	return nil
}

// expiry is when a question waiting wait under ctx closes: after wait, or at ctx's deadline
// when that comes first.
func expiry(ctx context.Context, wait time.Duration) time.Time {
	expires := time.Now().Add(wait)
	if dl, ok := ctx.Deadline(); ok && dl.Before(expires) {
		return dl
	}
	return expires
}

// Answer records the answer of question id's own client (a retry carrying it): the question's
// waiter records it when it waits in this process (and Answer returns once the question is
// withdrawn), the store at once when it waits in none.
// The first answer from any path stands: a later one gets budget.ErrAlreadyFinished with the
// pause as decided; budget.ErrNotFound says the question is no longer kept.
func (r *Room) Answer(ctx context.Context, id string, ans Answer) (budget.Pause, error) {
	r.mu.Lock()
	var ch chan answered
	var asked chan struct{}
	if w := r.waiting[id]; w != nil {
		ch, asked = w.answers, w.asked
	}
	r.mu.Unlock()
	if ch != nil {
		reply := make(chan recorded, 1)
		select {
		case ch <- answered{ans: ans, reply: reply}:
			rec := <-reply
			return rec.p, rec.err
		case <-asked: // the wait ended meanwhile
		case <-ctx.Done():
			return budget.Pause{}, ctx.Err()
		}
	}
	rec := r.record(ctx, id, ans)
	return rec.p, rec.err
}

// Decide answers question id as the operator (package func Decide), and wakes its waiter here
// at once; a waiter in another process sees it within its Poll.
func (r *Room) Decide(ctx context.Context, id string, approve bool, by string) (budget.Pause, error) {
	p, err := Decide(ctx, r.store, id, approve, by)
	if err == nil {
		r.poke(id)
	}
	return p, err
}

// List is the pending questions, of tenant when it is not empty (package func List).
func (r *Room) List(ctx context.Context, tenant string) ([]Entry, error) {
	return List(ctx, r.store, tenant)
}

// Open returns tenant's questions still open (pending, not expired) that were asked under
// run (Asking.Run), each as it was put (QuestionOf): what a path that did not put them shows.
func (r *Room) Open(ctx context.Context, tenant, run string) ([]Question, error) {
	all, err := r.store.PendingPauses(ctx, tenant, run)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	var out []Question
	for _, p := range all {
		// The store reads "" as any tenant or run; here "" is itself the key asked for.
		if p.Tenant == tenant && p.Run == run && now.Before(p.Expires) {
			out = append(out, QuestionOf(p))
		}
	}
	return out, nil
}

// Kept returns the pause kept of question id; budget.ErrNotFound when none is.
func (r *Room) Kept(ctx context.Context, id string) (budget.Pause, error) {
	return r.store.Pause(ctx, id)
}

// Claim takes decided question id for this process to carry the call on, once: as the
// process that asked it, or as any once that process's ledger owner is gone
// (budget.ErrHeldElsewhere while it lives; budget.ErrAlreadyFinished once claimed).
func (r *Room) Claim(ctx context.Context, id string) error { return r.store.ClaimPause(ctx, id) }

// Relay records what the call of question id came to after an answer given on another path
// (a held call's result, or its next question), for a retry waiting in another process.
func (r *Room) Relay(ctx context.Context, id string, outcome json.RawMessage) error {
	return r.store.SetPauseResult(ctx, id, outcome)
}

// Await waits until question id's pause satisfies until, read from the store each time it may
// have changed (the poller's tick, or a change here), or ctx ends.
func (r *Room) Await(ctx context.Context, id string, until func(budget.Pause) bool) (budget.Pause, error) {
	w, done := r.wait(id, false)
	defer done()
	for {
		changed := r.changes(w)
		if p, err := r.store.Pause(ctx, id); err == nil && until(p) {
			return p, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return budget.Pause{}, ctx.Err()
		}
	}
}
