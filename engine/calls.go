package engine

import (
	"context"
	"fmt"
	"sync"

	"github.com/mcp-sandbox/mcp-sandbox/engine/wire"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
)

// Calls answers one execution's binding calls and reads through its ToolCaller, at most a
// fixed number at a time, and hands each answer to reply: a local session writes it to the
// child's channel, the remote client posts it to the sandbox service. It is the one call
// limiter of both.
//
// The slot is taken in Dispatch, on the caller's protocol loop, before the next frame is
// read: a program that floods calls, or stops reading their results, is held back by its own
// channel instead of piling up goroutines and arguments on the host. Waiting for a slot ends
// with ctx (the wall clock), after which the loop notices the timeout.
//
// The goroutines are the execution's call workers, each kept for the next call once it has
// answered one (until the ctx of the Dispatch that started it ends; Wait waits for them): a
// program's sequential calls then reuse one goroutine, whose stack has grown to what a call
// needs (the ledger's SQLite is deep), instead of starting and growing a fresh one per call.
// There are never more workers than slots.
//
// Dispatch belongs to one goroutine (the protocol loop); Wait may be called from any.
type Calls struct {
	tools   ToolCaller
	reply   func(context.Context, *wire.Result)
	wg      sync.WaitGroup // the workers
	sem     chan struct{}  // a slot per call in flight
	jobs    chan func()    // hands a call to an idle worker
	workers int            // the workers started; only Dispatch touches it
}

// NewCalls returns the limiter of limit calls at once (at least one) answered through tools,
// nil meaning no tool is offered. reply is called on the call's worker, its slot still held,
// unless ctx has ended by then.
func NewCalls(tools ToolCaller, limit int, reply func(context.Context, *wire.Result)) *Calls {
	return &Calls{tools: tools, reply: reply, sem: make(chan struct{}, max(limit, 1)), jobs: make(chan func())}
}

// Dispatch answers f, a *wire.Call or a *wire.Read (any other frame is ignored), on a worker,
// once a slot is free or ctx has ended (then it is dropped).
func (c *Calls) Dispatch(ctx context.Context, f wire.Frame) {
	var id int64
	var do func(context.Context) toolcall.Answer
	switch f := f.(type) {
	case *wire.Call:
		id, do = f.ID, func(ctx context.Context) toolcall.Answer { return c.call(ctx, f) }
	case *wire.Read:
		id, do = f.ID, func(ctx context.Context) toolcall.Answer { return c.read(ctx, f) }
	default:
		return
	}
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return
	}
	job := func() { c.answer(ctx, id, do) }
	select {
	case c.jobs <- job: // an idle worker took it
		return
	default:
	}
	if c.workers == cap(c.sem) {
		// Every worker is busy or about to be idle (this call holds a slot, so one of them
		// has finished its call): wait for it.
		select {
		case c.jobs <- job:
		case <-ctx.Done():
			<-c.sem
		}
		return
	}
	c.workers++
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			job()
			select {
			case job = <-c.jobs:
			case <-ctx.Done():
				return
			}
		}
	}()
}

// Wait waits for the workers, which end with their Dispatch's ctx.
func (c *Calls) Wait() {
	if c != nil {
		c.wg.Wait()
	}
}

// call: the ToolCaller is the authority on names; it answers a name outside ToolNames with
// the precise kind (denied, excluded_builtin, unavailable), which a blanket refusal here
// would hide.
func (c *Calls) call(ctx context.Context, f *wire.Call) toolcall.Answer {
	if c.tools == nil {
		return toolcall.Answer{Kind: failure.Unavailable, Message: fmt.Sprintf("no tool named %q is offered to this program; TOOLS lists what is", f.Tool)}
	}
	return c.tools.CallTool(ctx, f.Tool, f.Args)
}

func (c *Calls) read(ctx context.Context, f *wire.Read) toolcall.Answer {
	if c.tools == nil {
		return toolcall.Answer{Kind: failure.Unavailable, Message: "no handle of this execution is known"}
	}
	return c.tools.ReadHandle(ctx, f.Handle, f.Offset, f.Limit, f.Pattern)
}

// answer runs one call and hands its result to reply, then gives its slot back.
func (c *Calls) answer(ctx context.Context, id int64, do func(context.Context) toolcall.Answer) {
	defer func() { <-c.sem }()
	out := wire.ResultOf(id, do(ctx))
	if ctx.Err() == nil {
		c.reply(ctx, out)
	}
}
