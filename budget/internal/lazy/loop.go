package lazy

import (
	"sync"
	"time"
)

// Delay bounds how long a queued lazy write waits for company.
const Delay = 2 * time.Millisecond

// FlushTimeout bounds a flush of queued writes that no caller waits for (the flusher's, and
// the last one at Close): as long as a budget.Ticket's Finish waits for its record.
const FlushTimeout = 5 * time.Second

// The states of a queued write, in an atomic.Int32: Queued, then Taken (a flush writes it) or
// Abandoned (its caller left before any flush took it).
const (
	Queued int32 = iota
	Taken
	Abandoned
)

// Loop is what a ledger's flusher of lazy writes waits on: a kick when a lazy write arrives,
// and the stop that ends it. The SQLite batcher and the PostgreSQL queue each run their own
// flush over it.
type Loop struct {
	kick    chan struct{} // a lazy write arrived: the flusher starts its delay
	stop    chan struct{}
	stopped chan struct{} // closed when the flusher has returned
	once    sync.Once
}

// NewLoop returns a Loop whose flusher is yet to start.
func NewLoop() *Loop {
	return &Loop{kick: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
}

// Poke tells the flusher a lazy write is queued; it never blocks.
func (l *Loop) Poke() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// Kicked waits for a poke; false once stopped.
func (l *Loop) Kicked() bool {
	select {
	case <-l.stop:
		return false
	case <-l.kick:
		return true
	}
}

// Sleep waits d; false once stopped.
func (l *Loop) Sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.stop:
		return false
	case <-t.C:
		return true
	}
}

// Done is called by the flusher as it returns.
func (l *Loop) Done() { close(l.stopped) }

// Halt stops the flusher and waits for it to return (its Done). Idempotent.
func (l *Loop) Halt() {
	l.once.Do(func() { close(l.stop) })
	<-l.stopped
}
