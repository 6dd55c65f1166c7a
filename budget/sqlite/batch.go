package sqlite

import (
	"context"
	"errors"
	"fmt"
	"github.com/mcp-sandbox/mcp-sandbox/budget/internal/lazy"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The SQLite ledger commits its writes in batches (group commit): a write that arrives while
// another batch is committing waits for it and is committed, with every other write queued by
// then, in the next transaction, each in a savepoint of its own, so one failing write leaves
// the others. A write is still committed before it returns. Writes that may lag, the
// tool_call_finished records (Ticket.FinishLater), wait in the queue for the next write (a
// call's tool_call_started, say, which must be durable before its upstream is touched), an
// explicit Flush, or lazy.Delay, whichever comes first: a program's sequential calls then
// cost one transaction each rather than two. Reads flush first, so they see every write.
//
// A leader yields its P once before it takes the queue. `serve` runs on one P (docs/design.md
// §19.4) and a commit never blocks long enough to hand it on, so without the yield nothing else
// would run while a batch commits, and the calls of other programs whose frames are already
// read would each lead a batch of their own after it; with it, every goroutine runnable at
// that moment reaches the queue first and its write shares the commit (§19.14).

// writeOp is one write waiting in the queue.
type writeOp struct {
	ctx   context.Context
	fn    func(tx *stmtTx) error
	lazy  time.Time    // when a lazy write was queued; zero for one committed at once
	done  chan error   // the result, once the op's batch has committed or failed
	state atomic.Int32 // lazy.Queued, then lazy.Taken (a batch runs it) or lazy.Abandoned (its caller left)
}

// batcher is the SQLite ledger's write queue and its flusher.
type batcher struct {
	wmu chan struct{} // one slot: the batch being committed; the leader holds it

	qmu     sync.Mutex // guards pending and closed
	pending []*writeOp
	closed  bool // closeBatches has begun: a write is refused

	loop *lazy.Loop

	commits atomic.Int64 // transactions committed: tests and measurements read it
}

func newBatcher() *batcher {
	return &batcher{wmu: make(chan struct{}, 1), loop: lazy.NewLoop()}
}

// write runs fn in a write transaction, committed before it returns.
func (s *Ledger) write(ctx context.Context, fn func(tx *stmtTx) error) error {
	return s.submit(ctx, fn, true)
}

// writeLater queues fn for the next batch and returns once that batch has committed.
func (s *Ledger) writeLater(ctx context.Context, fn func(tx *stmtTx) error) error {
	return s.submit(ctx, fn, false)
}

func (s *Ledger) submit(ctx context.Context, fn func(tx *stmtTx) error, now bool) error {
	b := s.batch
	// A caller already gone writes nothing: its statements would not see its cancellation
	// (stmtTx), and the select below may take the lead before it sees ctx done.
	if ctx.Err() != nil {
		return fmt.Errorf("budget: ledger: waiting to write: %w", context.Cause(ctx))
	}
	op := &writeOp{ctx: ctx, fn: fn, done: make(chan error, 1)}
	if !now {
		op.lazy = time.Now()
	}
	b.qmu.Lock()
	if b.closed {
		b.qmu.Unlock()
		return errLedgerClosed
	}
	b.pending = append(b.pending, op)
	b.qmu.Unlock()
	var lead chan struct{} // nil (never ready) for a lazy write: it only waits
	if now {
		lead = b.wmu
	} else {
		b.loop.Poke()
	}
	for {
		select {
		case err := <-op.done:
			return err
		case lead <- struct{}{}:
			// Leader: commit everything queued by now, this write included (it was queued
			// before, so an earlier batch ran it or this one does), once the writes of the
			// goroutines runnable now have joined the queue.
			runtime.Gosched()
			s.commitPending()
			<-b.wmu
		case <-ctx.Done():
			return lazy.Leave(ctx, &op.state, op.done)
		}
	}
}

// Flush commits every queued write now and returns once they are committed.
func (s *Ledger) Flush(ctx context.Context) error {
	b := s.batch
	b.qmu.Lock()
	empty := len(b.pending) == 0
	b.qmu.Unlock()
	if empty {
		return nil
	}
	select {
	case b.wmu <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("budget: ledger: waiting to flush: %w", context.Cause(ctx))
	}
	s.commitPending()
	<-b.wmu
	return nil
}

// flusher commits a lazy write once it has waited lazy.Delay, until stop. While a program's
// calls keep coming, each call's tool_call_started takes the previous call's finish along
// before that is due: the flusher then waits on for the write queued since, rather than
// commit a transaction of its own (which a call's start would then wait behind).
func (s *Ledger) flusher() {
	b := s.batch
	defer b.loop.Done()
	for b.loop.Kicked() {
		wait, queued := lazy.Delay, true
		for queued && wait > 0 {
			if !b.loop.Sleep(wait) {
				return
			}
			wait, queued = b.lazyWait()
		}
		if !queued {
			continue // a batch took them all along
		}
		b.wmu <- struct{}{}
		s.commitPending()
		<-b.wmu
	}
}

// lazyWait is how much longer the oldest lazy write still queued may wait (0 or less: it is
// due), and whether there is one.
func (b *batcher) lazyWait() (time.Duration, bool) {
	b.qmu.Lock()
	defer b.qmu.Unlock()
	var oldest time.Time
	for _, op := range b.pending {
		if !op.lazy.IsZero() && op.state.Load() == lazy.Queued && (oldest.IsZero() || op.lazy.Before(oldest)) {
			oldest = op.lazy
		}
	}
	if oldest.IsZero() {
		return 0, false
	}
	return lazy.Delay - time.Since(oldest), true
}

// errLedgerClosed refuses a write that arrives once the ledger is closing.
var errLedgerClosed = errors.New("budget: ledger: closed")

// closeBatches refuses new writes, stops the flusher and commits what is queued. Idempotent.
func (s *Ledger) closeBatches() {
	b := s.batch
	b.qmu.Lock()
	b.closed = true
	b.qmu.Unlock()
	b.loop.Halt()
	b.wmu <- struct{}{}
	s.commitPending()
	<-b.wmu
}

// commitPending runs every queued write in one transaction and hands each its result. Several
// run one after another, as one; only when one of them fails does the batch run again with
// each in a savepoint of its own (a savepoint and its release per write were a third of the
// statements a binding call's records cost). So a write's fn may run twice, the first run
// rolled back: it must set what it hands back afresh on each run. The caller holds wmu.
func (s *Ledger) commitPending() {
	b := s.batch
	b.qmu.Lock()
	queued := b.pending
	b.pending = nil
	b.qmu.Unlock()
	ops := lazy.Take(queued, func(op *writeOp) *atomic.Int32 { return &op.state })
	if len(ops) == 0 {
		return
	}
	results := make([]error, len(ops))
	deliver := func(all error) {
		for i, op := range ops {
			if all != nil {
				results[i] = all
			}
			op.done <- results[i]
		}
	}
	// A context that is never done: the driver watches a cancellable one with a goroutine of
	// its own for each statement, the BEGIN and the COMMIT included (stmtTx), and a batch's
	// only wait, its BEGIN's for another process's write lock, ends at the busy timeout.
	ctx := context.Background()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		deliver(fmt.Errorf("budget: ledger: %w", err))
		return
	}
	st := &stmtTx{Tx: tx, s: s}
	if len(ops) == 1 {
		err := ops[0].fn(st)
		if err == nil {
			err = st.settle(ctx)
		}
		if err != nil {
			_ = tx.Rollback()
			deliver(err)
			return
		}
	} else if !runAll(ctx, st, ops) {
		// One of them failed: again from the start, each in a savepoint of its own, so the
		// failure is its own and the others are committed.
		_ = tx.Rollback()
		if tx, err = s.db.BeginTx(ctx, nil); err != nil {
			deliver(fmt.Errorf("budget: ledger: %w", err))
			return
		}
		st = &stmtTx{Tx: tx, s: s}
		for i, op := range ops {
			if _, err := st.ExecContext(ctx, `SAVEPOINT op`); err != nil {
				_ = tx.Rollback()
				deliver(fmt.Errorf("budget: ledger: %w", err))
				return
			}
			if results[i] = op.fn(st); results[i] == nil {
				results[i] = st.settle(ctx) // what a write owes is its own: written in its savepoint
			}
			if results[i] != nil {
				st.owed = nil
				if _, err := st.ExecContext(ctx, `ROLLBACK TO op`); err != nil {
					_ = tx.Rollback()
					deliver(fmt.Errorf("budget: ledger: %w", err))
					return
				}
			}
			if _, err := st.ExecContext(ctx, `RELEASE op`); err != nil {
				_ = tx.Rollback()
				deliver(fmt.Errorf("budget: ledger: %w", err))
				return
			}
		}
	}
	if err := tx.Commit(); err != nil {
		deliver(fmt.Errorf("budget: ledger commit: %w", err))
		return
	}
	b.commits.Add(1)
	deliver(nil)
	s.ckpt.Poke()
}

// runAll runs every op in tx, then writes what they owe the Runs' rows, and reports whether
// each succeeded.
func runAll(ctx context.Context, tx *stmtTx, ops []*writeOp) bool {
	for _, op := range ops {
		if op.fn(tx) != nil {
			return false
		}
	}
	return tx.settle(ctx) == nil
}
