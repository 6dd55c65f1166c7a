package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/budget/internal/lazy"
)

// The PostgreSQL ledger pipelines what may lag with what may not: a tool_call_finished queued
// by FinishCallLater goes to the database with the next metered tool_call_started, in one
// round trip and one implicit transaction (a pgx batch), so a program's sequential calls cost
// one commit each; the started record is still committed before its upstream is touched.
// What finds nothing to ride with is sent after lazy.Delay, or by Flush; reads flush first.
// Should the batch fail, each record is written on its own, as without it.

// pgFinish is one tool_call_finished waiting in the queue.
type pgFinish struct {
	f     budget.CallFinish
	done  chan error   // the result, once written or failed
	state atomic.Int32 // lazy.Queued, then lazy.Taken or lazy.Abandoned
}

// pgQueue is the PostgreSQL ledger's queue of lazy records and its flusher.
type pgQueue struct {
	mu      sync.Mutex // guards pending and closed
	pending []*pgFinish
	closed  bool // closeQueue has begun: a lazy record is written at once

	loop *lazy.Loop
}

func newPGQueue() *pgQueue {
	return &pgQueue{loop: lazy.NewLoop()}
}

// FinishCallLater is FinishCall sent with the next metered StartCall (or lazy.Delay later, or
// at a Flush); it returns once written.
func (p *Ledger) FinishCallLater(ctx context.Context, f budget.CallFinish) error {
	if !f.Status.Finishing() {
		return fmt.Errorf("budget: %q does not finish a call", f.Status)
	}
	q := p.queue
	op := &pgFinish{f: f, done: make(chan error, 1)}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return p.FinishCall(ctx, f)
	}
	q.pending = append(q.pending, op)
	q.mu.Unlock()
	q.loop.Poke()
	select {
	case err := <-op.done:
		return err
	case <-ctx.Done():
		return lazy.Leave(ctx, &op.state, op.done)
	}
}

// takeFinishes claims every queued record.
func (p *Ledger) takeFinishes() []*pgFinish {
	q := p.queue
	q.mu.Lock()
	queued := q.pending
	q.pending = nil
	q.mu.Unlock()
	return lazy.Take(queued, func(op *pgFinish) *atomic.Int32 { return &op.state })
}

func finishArgs(f budget.CallFinish) []any {
	u := f.Usage
	return []any{f.ID, string(f.Status), u.TransferBytes, u.ProducedBytes, u.PreservedBytes, nullJSON(f.Attachments), f.Kind, f.Message}
}

// sendFinishes writes ops in one batch before more (another statement queued on the same
// batch, whose result more reads), and hands each op its result. When the batch fails,
// nothing of it was committed: the records are written one by one, and more's error is
// returned for its caller to retry its own statement alone.
func (p *Ledger) sendFinishes(ctx context.Context, ops []*pgFinish, more func(b *pgx.Batch) func(pgx.BatchResults) error) error {
	b := &pgx.Batch{}
	for _, op := range ops {
		b.Queue(finishCall, finishArgs(op.f)...)
	}
	var read func(pgx.BatchResults) error
	if more != nil {
		read = more(b)
	}
	br := p.pool.SendBatch(ctx, b)
	counts := make([]int, len(ops))
	var err error
	for i := range ops {
		if err = br.QueryRow().Scan(&counts[i]); err != nil {
			break
		}
	}
	var moreErr error
	if err == nil && read != nil {
		moreErr = read(br)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// The implicit transaction was rolled back whole: write each record on its own.
		for _, op := range ops {
			op.done <- p.FinishCall(context.WithoutCancel(ctx), op.f)
		}
		return err
	}
	for i, op := range ops {
		if counts[i] == 1 {
			op.done <- nil
		} else {
			op.done <- p.notFinished(ctx, op.f.ID)
		}
	}
	return moreErr
}

// Flush writes every queued record now.
func (p *Ledger) Flush(ctx context.Context) error {
	if ops := p.takeFinishes(); len(ops) > 0 {
		_ = p.sendFinishes(ctx, ops, nil) // each op has its result
	}
	return nil
}

// flusher sends lazy records lazy.Delay after the first of them arrives, until stop.
func (p *Ledger) flusher() {
	q := p.queue
	defer q.loop.Done()
	for q.loop.Kicked() && q.loop.Sleep(lazy.Delay) {
		ctx, cancel := context.WithTimeout(context.Background(), lazy.FlushTimeout)
		_ = p.Flush(ctx)
		cancel()
	}
}

// closeQueue stops the flusher and writes what is queued. Idempotent.
func (p *Ledger) closeQueue() {
	q := p.queue
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.loop.Halt()
	ctx, cancel := context.WithTimeout(context.Background(), lazy.FlushTimeout)
	defer cancel()
	_ = p.Flush(ctx)
}

// notFinished says why finishing call id changed nothing: it is unknown, or already ended.
func (p *Ledger) notFinished(ctx context.Context, id string) error {
	var status string
	err := p.pool.QueryRow(ctx, `SELECT status FROM ledger_calls WHERE id = $1`, id).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: call %s", budget.ErrNotFound, id)
	}
	if err != nil {
		return wrapPG(err)
	}
	return fmt.Errorf("%w: call %s is %s", budget.ErrAlreadyFinished, id, status)
}
