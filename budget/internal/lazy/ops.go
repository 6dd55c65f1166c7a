package lazy

import (
	"context"
	"fmt"
	"sync/atomic"
)

// Take returns the writes of queued that a flush takes: each still Queued is now Taken; one
// whose caller left first (Abandoned) is dropped. state returns a write's state.
func Take[W any](queued []W, state func(W) *atomic.Int32) []W {
	taken := queued[:0]
	for _, w := range queued {
		if state(w).CompareAndSwap(Queued, Taken) {
			taken = append(taken, w)
		}
	}
	return taken
}

// Leave is what a caller whose ctx ended while its write waited does: it abandons the write
// if no flush has taken it yet, and otherwise waits for the result the flush sends on done,
// which stands.
func Leave(ctx context.Context, state *atomic.Int32, done <-chan error) error {
	if state.CompareAndSwap(Queued, Abandoned) {
		return fmt.Errorf("budget: ledger: waiting to write: %w", context.Cause(ctx))
	}
	return <-done
}
