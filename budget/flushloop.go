package budget

import (
	"sync"
	"time"
)

// flushLoop is what a ledger's flusher of lazy writes waits on: a kick when a lazy write
// arrives, and the stop that ends it. The SQLite batcher and the PostgreSQL queue each run
// their own flush over it.
type flushLoop struct {
	kick    chan struct{} // a lazy write arrived: the flusher starts its delay
	stop    chan struct{}
	stopped chan struct{} // closed when the flusher has returned
	once    sync.Once
}

func newFlushLoop() flushLoop {
	return flushLoop{kick: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
}

// poke tells the flusher a lazy write is queued; it never blocks.
func (l *flushLoop) poke() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// kicked waits for a poke; false once stopped.
func (l *flushLoop) kicked() bool {
	select {
	case <-l.stop:
		return false
	case <-l.kick:
		return true
	}
}

// sleep waits d; false once stopped.
func (l *flushLoop) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.stop:
		return false
	case <-t.C:
		return true
	}
}

// halt stops the flusher and waits for it to return. Idempotent.
func (l *flushLoop) halt() {
	l.once.Do(func() { close(l.stop) })
	<-l.stopped
}
