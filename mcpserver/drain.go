package mcpserver

import (
	"context"
	"sync"
	"time"
)

// Drain is how a server's shutdown reaches the executions in flight. Stop ends every running
// program (its context is cancelled, so its tree is killed and its result says cancelled) and
// refuses new ones; Wait lets the caller close runners and the ledger only once they have
// returned, so no finished call is left looking like a crash. Safe for concurrent use.
type Drain struct {
	mu      sync.Mutex // guards stopped
	stopped bool
	stop    chan struct{}
	running sync.WaitGroup
}

// NewDrain returns a Drain that has not stopped.
func NewDrain() *Drain { return &Drain{stop: make(chan struct{})} }

// Stop cancels the executions in flight and refuses new ones. It is idempotent.
func (d *Drain) Stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.stopped {
		d.stopped = true
		close(d.stop)
	}
}

// Wait waits at most timeout for the executions in flight; it reports whether they all ended.
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
	go func() {
		select {
		case <-d.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(); d.running.Done() }, true
}
