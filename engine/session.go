package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/egress"
	"github.com/mcp-sandbox/mcp-sandbox/engine/wire"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// session is one execution in flight: the host's side of the host⇄child protocol over one
// prepared child. It grades the child's hello (accept), sends the program, reads its frames
// (loop, onFrame), answers its binding calls through the ToolCaller (Calls, calls.go),
// and ends it (teardown, flushBeforeKill); finish.go turns the ending into the Outcome. The
// Runner (runner.go) prepares children and starts one session per Run.
type session struct {
	r  *Runner
	ex Execution
	t  Terms
	p  *prepared // the child, its output captures and its frames
	// helloSeen: the child's first frame arrived, so the init helper's setup is behind it
	// and no exit status of the child can mean "setup failed" any more.
	helloSeen bool
	// running: the program was sent, so there may be output in the child's buffers to flush.
	running bool
	res     *Outcome

	w      *wire.Writer
	calls  *Calls // the program's binding calls in flight
	cancel context.CancelFunc
	// proxy is the execution's egress proxy under network rules, from accept until finish.
	proxy *egress.Proxy
}

type frameOrErr struct {
	f   wire.Frame
	err error
}

// drive runs the protocol to its end and fills s.res, in four steps: open (the clocks and the
// call context), loop (frames, exits and clocks until one ends the execution), teardown (kill,
// wait for calls and the exit, close) and finish (the Outcome). Artifacts are collected between
// loop and teardown, while the child still holds its workspace; a program the host ends (wall
// clock, cancel) is asked to flush its output there too (flushBeforeKill).
//
//	child                                  host (session)
//	  │── hello {version, probe} ──────────▶│  accept: grade; refuse → abort, or
//	  │◀──────────────── run {program, …} ──│
//	  │── call / read {id, …} ─────────────▶│  Calls: on a worker of its own, ≤ MaxConcurrentCalls
//	  │◀────────────────── result {id, …} ──│  (in any order)
//	  │── done {ok, value | error} ────────▶│  collect artifacts, teardown, finish
func (s *session) drive(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	defer s.cancel()
	defer s.p.cancel()
	c := s.open(ctx)
	defer c.stop()
	e := s.loop(ctx, c)
	if e.done != nil {
		s.collect(ctx)
	}
	if e.done != nil && e.done.OK && s.outputEnded() && s.treeKillCertain() {
		// The program completed and every byte it wrote is in: the result is known now, and
		// nothing of the child's end (its exit, the tree's cgroup) can change it. The Runner
		// ends the child in the background; Close waits for that.
		s.cancel()
		s.calls.Wait()
		s.finish(e.done, e.exit, nil, nil, TreeUsage{})
		s.r.background.Add(1)
		go func() {
			defer s.r.background.Done()
			s.teardown(&e)
		}()
		return
	}
	s.flushBeforeKill(&e)
	tree := s.teardown(&e)
	s.finish(e.done, e.exit, e.fail, e.limit, tree)
}

// treeKillCertain reports whether the child's tree dies with it whatever the program did: a
// cgroup or a pid namespace holds it and the host can signal it. Only then may the result
// return before the teardown; otherwise (a subreaper the program could have killed, say) the
// teardown's account of the tree (escaped or not) belongs in the result.
func (s *session) treeKillCertain() bool {
	f := s.p.child.Facts()
	return (f.Cgroup || f.PIDNamespace) && !f.Unkillable
}

// outputEnder is a Child that tells when its output streams have ended: every process let go
// of their write ends, so every byte written is in the captures (spawned children are).
type outputEnder interface {
	OutputClosed() <-chan struct{}
}

// outputGrace is how long, after done, the host waits for the streams' end to be read: the
// bootstrap closes them before it sends done, so only the copies' last read is left.
const outputGrace = 5 * time.Millisecond

// outputEnded reports whether the child's output streams have ended (waiting outputGrace at
// most): a process of the program that still holds them (a daemon) may write more, and then
// the tree must be killed before the output is final.
func (s *session) outputEnded() bool {
	oe, ok := s.p.child.(outputEnder)
	if !ok {
		return false
	}
	select {
	case <-oe.OutputClosed():
		return true
	default:
	}
	t := time.NewTimer(outputGrace)
	defer t.Stop()
	select {
	case <-oe.OutputClosed():
		return true
	case <-t.C:
		return false
	}
}

// clocks are one session's deadlines: the wall clock, the wait for hello, the progress ticks,
// and the context its binding calls run under.
type clocks struct {
	wall, hello  *time.Timer
	helloTimeout time.Duration
	progress     <-chan time.Time
	started      time.Time
	callCtx      context.Context
	stop         func()
}

// ending is how the protocol loop ended: done from the child, the child's exit, or a failure
// the host decided (with the limit it names).
type ending struct {
	done  *wire.Done
	exit  *Exit
	fail  *Failure
	limit *LimitName
}

// open starts the session's clocks and its writer. Binding calls, and every write to the
// child, end with the wall clock at the latest: a child that stops reading its results cannot
// hold the host past it.
func (s *session) open(ctx context.Context) *clocks {
	ch := s.p.child.Channel()
	s.w = wire.NewWriter(ch)
	s.calls = NewCalls(s.ex.Tools, s.r.opts.MaxConcurrentCalls, func(_ context.Context, out *wire.Result) { _ = s.w.WriteFrame(out) })
	wall := time.Duration(s.t.WallSeconds * float64(time.Second))
	deadline := time.Now().Add(wall)
	c := &clocks{wall: time.NewTimer(wall), helloTimeout: min(s.r.opts.HelloTimeout, wall), started: time.Now()}
	c.hello = time.NewTimer(c.helloTimeout)
	callCtx, cancelCalls := context.WithDeadline(ctx, deadline)
	c.callCtx = callCtx
	if d, ok := ch.(interface{ SetWriteDeadline(time.Time) error }); ok {
		_ = d.SetWriteDeadline(deadline)
	}
	stopTicks := func() {}
	if s.ex.Progress != nil {
		tk := time.NewTicker(time.Second)
		c.progress, stopTicks = tk.C, tk.Stop
	}
	c.stop = func() {
		c.wall.Stop()
		c.hello.Stop()
		stopTicks()
		cancelCalls()
	}
	return c
}

// endTeller is a Child that can tell, once its channel has ended before its exit is known,
// whether the program's interpreter has exited or is exiting (the kernel is taking it down),
// its exit status then on its way through whatever must reap and report it, from whether it
// still runs (docs/design.md §4.6).
type endTeller interface {
	InterpreterEnded() bool
}

// channelGrace is how long, after the child's channel ends, its exit has to show before the
// host asks whether the interpreter still runs (endTeller); a child that cannot tell is held to
// have closed its channel and kept running when none has shown by then.
const channelGrace = 500 * time.Millisecond

// interpreterEnded asks the child whether its interpreter has ended (endTeller).
func (s *session) interpreterEnded() bool {
	t, ok := s.p.child.(endTeller)
	return ok && t.InterpreterEnded()
}

// loop reads the child's frames and watches its exit and the clocks until one of them ends the
// execution.
func (s *session) loop(ctx context.Context, c *clocks) (e ending) {
	frames, exited := s.p.frames, s.p.exited
	var channelEOF <-chan time.Time
	awaitingExit := false // the interpreter ended; its exit status is on its way
	for {
		select {
		case fe := <-frames:
			if fe.err != nil {
				if !endOfChannel(fe.err) {
					e.fail = violationFailure(fe.err, s.helloSeen)
					return e
				}
				// The child closed its end: give its exit a moment to explain why.
				frames = nil
				if e.exit != nil {
					return e
				}
				channelEOF = time.After(channelGrace)
				continue
			}
			if e.done, e.fail = s.onFrame(c, fe.f); e.done != nil || e.fail != nil {
				return e
			}
		case x := <-exited:
			// Frames the child wrote before it exited may still be queued: read them first.
			e.exit, exited = &x, nil
			if frames == nil {
				return e
			}
			channelEOF = time.After(time.Second)
		case <-channelEOF:
			if e.exit == nil && s.interpreterEnded() {
				// Its status comes once whatever reaps it is scheduled, which no fixed time
				// bounds on a busy host: the wall clock does.
				channelEOF, awaitingExit = nil, true
				continue
			}
			if e.exit == nil {
				e.fail = &Failure{Kind: failure.ProtocolViolation, Executed: s.helloSeen,
					Message: "the sandbox child closed its channel to the host and kept running; it was killed"}
			}
			return e
		case <-c.hello.C:
			e.fail = &Failure{Kind: failure.BackendUnavailable,
				Message: fmt.Sprintf("the sandbox child did not report its containment within %s; nothing ran", c.helloTimeout)}
			return e
		case <-c.wall.C:
			if awaitingExit {
				e.fail = &Failure{Kind: failure.ProgramError, Executed: true,
					Message: fmt.Sprintf("the interpreter ended before the program finished, and its exit status did not reach the host within wall_seconds=%g", s.t.WallSeconds)}
				return e
			}
			e.fail = &Failure{Kind: failure.Timeout, Executed: s.helloSeen,
				Message: fmt.Sprintf("the program did not finish within wall_seconds=%g and was killed", s.t.WallSeconds)}
			e.limit = limitPtr(LimitWall)
			return e
		case <-ctx.Done():
			e.fail = &Failure{Kind: failure.Cancelled, Executed: s.helloSeen,
				Message: "the request was cancelled; the program and every process it started were killed"}
			s.res.Cancelled = true
			return e
		case <-c.progress:
			s.ex.Progress(time.Since(c.started).Seconds(), s.p.stdout)
		}
	}
}

// onFrame handles one frame of the child: hello is graded (and answered with run or abort),
// calls and reads are dispatched, done ends the loop.
func (s *session) onFrame(c *clocks, f wire.Frame) (*wire.Done, *Failure) {
	switch f := f.(type) {
	case *wire.Hello:
		s.helloSeen = true
		c.hello.Stop()
		if refusal := s.accept(f); refusal != nil {
			_ = s.w.WriteFrame(&wire.Abort{Kind: string(refusal.Kind), Reason: refusal.Message})
			return nil, refusal
		}
		s.running = true
	case *wire.Call, *wire.Read:
		s.calls.Dispatch(c.callCtx, f)
	case *wire.Done:
		return f, nil
	}
	return nil, nil
}

// collect gathers the artifacts after done: the interpreter waits after done until the host
// closes the channel, so the workspace (and a namespace holding it) is still there.
func (s *session) collect(ctx context.Context) {
	if !s.r.opts.Artifacts.Collect {
		return
	}
	if ws := s.p.child.Workspace(); ws != "" {
		s.res.Artifacts, s.res.ArtifactFiles, s.res.ArtifactsOmit = collectArtifacts(ws, s.r.opts.Artifacts)
	} else if a, ok := s.p.child.(WorkspaceArchiver); ok {
		s.res.Artifacts, s.res.ArtifactFiles, s.res.ArtifactsOmit = collectArchive(ctx, a, s.r.opts.Artifacts)
	} else {
		s.res.ArtifactsOmit = append(s.res.ArtifactsOmit, OmittedFile{Path: ".",
			Reason: "the " + s.r.backend.Name() + " backend cannot show its workspace to the host; nothing was collected"})
	}
}

// teardown kills the tree, cancels and waits for the binding calls in flight, waits (bounded)
// for the child's exit when the loop saw neither it nor done, and closes the child and its
// channel. After done the exit decides nothing, and its status may come late (a forked
// child's from its template, once scheduled): Close waits for the child's death itself.
func (s *session) teardown(e *ending) TreeUsage {
	s.p.child.Kill()
	s.cancel()
	s.p.cancel()
	s.calls.Wait()
	if e.exit == nil && e.done == nil {
		select {
		case x := <-s.p.exited:
			e.exit = &x
		case <-time.After(5 * time.Second):
			e.exit = &Exit{Code: -1, Err: errors.New("the child did not exit after SIGKILL")}
		}
	}
	tree := s.p.child.Close()
	s.p.child.Channel().Close()
	s.p.reaped(tree)
	return tree
}

func endOfChannel(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isClosed(err)
}

// FlushGrace is how long the host waits, when it ends a running program (wall clock,
// cancellation), for the child to flush what it printed and exit before the tree is killed.
// A child that cooperates takes milliseconds; one that does not (it replaced the bootstrap's
// SIGIO handler, or its main thread is stuck in C code) costs this much more, once.
const FlushGrace = 500 * time.Millisecond

// flushBeforeKill: when the host itself ended a running program (its wall clock, a cancel),
// the child is asked to flush what it printed before teardown kills it (askToFlush).
func (s *session) flushBeforeKill(e *ending) {
	if e.exit != nil || !s.running || e.fail == nil || e.fail.Kind != failure.Timeout && e.fail.Kind != failure.Cancelled {
		return
	}
	if x, ok := s.askToFlush(s.p.exited); ok {
		e.exit = &x
	}
}

// askToFlush tells the child the execution is over by shutting down the host's side of the
// channel: the bootstrap, which armed the channel with O_ASYNC, gets SIGIO, flushes its
// output streams and exits. It waits up to FlushGrace for that exit and reports it. A
// channel without a write half to shut down gets no warning.
func (s *session) askToFlush(exited <-chan Exit) (Exit, bool) {
	cw, ok := s.p.child.Channel().(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return Exit{}, false
	}
	grace := time.NewTimer(FlushGrace)
	defer grace.Stop()
	select {
	case e := <-exited:
		return e, true
	case <-grace.C:
		return Exit{}, false
	}
}

func isClosed(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrClosed)
}

func violationFailure(err error, executed bool) *Failure {
	var v *wire.Violation
	if errors.As(err, &v) {
		return &Failure{Kind: failure.ProtocolViolation, Executed: executed,
			Message: "the sandbox child broke the protocol (" + v.Reason + "); it was killed"}
	}
	return &Failure{Kind: failure.ProtocolViolation, Executed: executed,
		Message: "reading from the sandbox child failed: " + err.Error()}
}

// accept grades the hello and returns a refusal when the terms are not met.
func (s *session) accept(h *wire.Hello) *Failure {
	if h.Version != wire.Version {
		return &Failure{Kind: failure.ProtocolViolation,
			Message: fmt.Sprintf("the sandbox child speaks protocol version %d, the host %d; nothing ran", h.Version, wire.Version)}
	}
	gr := grade(h.Probe, s.p.child.Facts(), s.t, s.r.opts.EnvAllowlist)
	s.res.Guarantees, s.res.Isolation, s.res.NetworkDenied = gr.guarantees, gr.isolation, gr.networkDenied
	if why := separated(h.Probe, s.p.child.Facts()); why != "" {
		return &Failure{Kind: failure.IsolationUnavailable,
			Message: "the child forked from a template is not kept apart from its siblings (" + why + "); nothing ran"}
	}
	if !gr.isolation.AtLeast(s.t.Isolation) {
		return &Failure{Kind: failure.IsolationUnavailable, Message: fmt.Sprintf(
			"isolation %q was required, but the %s backend reached only %q here; nothing ran",
			s.t.Isolation, s.r.backend.Name(), gr.isolation)}
	}
	if unmet := s.r.unmet(s.t, gr); len(unmet) > 0 {
		var parts []string
		for _, u := range unmet {
			parts = append(parts, fmt.Sprintf("%s is %s (%s)", u.Dimension, gr.guarantees.Get(u.Dimension), u.Why))
		}
		return &Failure{Kind: failure.IsolationUnavailable, Message: "the sandbox cannot meet the terms: " +
			strings.Join(parts, "; ") + "; nothing ran"}
	}
	if s.t.Network == NetworkUnrestricted && gr.guarantees.Get(DimNetwork) == Enforced && !s.p.child.Facts().NetNamespace {
		// Requested network that the backend denies anyway: say so rather than run without it.
		return &Failure{Kind: failure.NetworkUnavailable,
			Message: "network access was granted, but the " + s.r.backend.Name() + " backend denies it; nothing ran"}
	}
	if s.t.Network == NetworkRules {
		ec, ok := s.p.child.(EgressChild)
		if !ok || ec.EgressListener() == nil || s.p.ca == nil {
			return &Failure{Kind: failure.NetworkUnavailable,
				Message: "network by rules was granted, but the " + s.r.backend.Name() + " backend gave the sandbox no route to the egress proxy; nothing ran"}
		}
		pol := *s.r.opts.Egress
		if s.ex.Logger != nil {
			pol.Logger = s.ex.Logger
		}
		s.proxy = egress.New(&pol, s.p.ca)
		s.proxy.Serve(ec.EgressListener())
	}
	run := &wire.Run{Program: s.ex.Program, Tools: append([]string{}, s.ex.ToolNames...),
		Aliases: append([]string{}, s.ex.Aliases...), Signatures: s.ex.Signatures}
	if err := s.w.WriteFrame(run); err != nil {
		return &Failure{Kind: failure.BackendUnavailable, Message: "the sandbox child went away before the program was sent: " + err.Error()}
	}
	return nil
}
