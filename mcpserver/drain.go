package mcpserver

import (
	"context"
	"sync"
	"time"
)

// Drain is how a server's shutdown reaches what its servers run. Stop ends every running
// program (its context is cancelled, so its tree is killed and its result says cancelled) and
// refuses new ones; Wait lets the caller close runners and the ledger only once they have
// returned, so no finished call is left looking like a crash; Close then ends the sessions of
// every server built with this Drain and waits for the goroutines that record their Runs'
// ends. The order for the caller: Stop, Wait, Close, then close the ledger. Safe for
// concurrent use.
type Drain struct {
	mu      sync.Mutex // guards stopped and servers
	stopped bool
	stop    context.Context // cancelled by Stop
	cancel  context.CancelFunc
	running sync.WaitGroup
	servers []*handlers
}

// NewDrain returns a Drain that has not stopped.
func NewDrain() *Drain {
	ctx, cancel := context.WithCancel(context.Background())
	return &Drain{stop: ctx, cancel: cancel}
}

// Stop cancels the executions in flight and refuses new ones. It is idempotent.
func (d *Drain) Stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.stopped {
		d.stopped = true
		d.cancel()
	}
}

// add makes d the owner of a server's session watchers.
func (d *Drain) add(h *handlers) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.servers = append(d.servers, h)
}

// Close stops d, closes every session of the servers built with it, and waits at most timeout
// for their watchers (each records its session's Run as ended); it reports whether they all
// ended. It is idempotent.
func (d *Drain) Close(timeout time.Duration) bool {
	d.Stop()
	d.mu.Lock()
	servers := d.servers
	d.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, h := range servers {
			h.closeSessions()
		}
	}()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// Wait waits at most timeout for the executions in flight; it reports whether they all ended.
// (The goroutine that waits stays behind a timeout it loses, until the executions end.)
func (d *Drain) Wait(timeout time.Duration) bool {
	done := make(chan struct{})
	go func() { d.running.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// begin registers an execution; ok is false once the drain has stopped. end must be called
// when the execution returns; ctx is cancelled by Stop.
func (d *Drain) begin(ctx context.Context) (_ context.Context, end func(), ok bool) {
	if d == nil {
		return ctx, func() {}, true
	}
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return ctx, nil, false
	}
	d.running.Add(1)
	d.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	unhook := context.AfterFunc(d.stop, cancel)
	return ctx, func() { unhook(); cancel(); d.running.Done() }, true
}
