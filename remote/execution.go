package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/wire"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// execution is one Run in flight on the client: its stream, its calls and its clocks.
type execution struct {
	s     *Sandbox
	ex    engine.Execution
	t     engine.Terms
	start time.Time
	log   *slog.Logger

	id     string       // from the accepted frame
	ending failure.Kind // set when the client ends the execution: timeout or cancelled
	secret string       // the credential the start request carried, to scrub from what the service says
	st     *stream      // owned by the reader goroutine until it has ended
	calls  *engine.Calls
	called bool // the program asked for a call or a read (set and read by drive's goroutine)
}

type streamEvent struct {
	f   any
	err error
}

// drive sends the program and follows its stream to the end, in named steps: send (the start
// request, until its answer's headers), open (the answer must be a frame stream), read (a
// goroutine of its own splits and checks the frames) and follow (the frames and the clocks,
// until one of them ends the execution). The execution's deadline starts with the request:
// its wall clock and Slack, and TransferTimeout once the program has ended (dataStarted).
func (x *execution) drive(ctx context.Context) *engine.Outcome {
	// The stream is ended by this function, not by ctx: after a cancellation it still reads
	// the service's last frames for a moment, to keep what the program printed.
	streamCtx, endStream := context.WithCancel(context.WithoutCancel(ctx))
	defer endStream()
	wall := time.Duration(x.t.WallSeconds*float64(time.Second)) + x.s.opts.Slack
	deadline := time.NewTimer(wall)
	defer deadline.Stop()
	resp, res := x.send(ctx, streamCtx, endStream, deadline)
	if res != nil {
		return res
	}
	if res := x.open(resp); res != nil {
		drainBody(resp)
		return res
	}
	r := x.read(resp.Body)
	callCtx, cancelCalls := context.WithDeadline(ctx, time.Now().Add(wall))
	defer func() {
		cancelCalls()
		close(r.stop)
		endStream()
		resp.Body.Close()
		<-r.done
		x.calls.Wait()
	}()
	return x.follow(ctx, callCtx, r, deadline)
}

// send posts the program and waits for the answer's headers, unless ctx or the deadline ends
// the execution first.
func (x *execution) send(ctx, streamCtx context.Context, endStream func(), deadline *time.Timer) (*http.Response, *engine.Outcome) {
	start := StartRequest{Protocol: Version, Program: x.ex.Program, Terms: x.t, Tools: append([]string{}, x.ex.ToolNames...),
		Aliases: append([]string{}, x.ex.Aliases...), Signatures: x.ex.Signatures, Calls: x.ex.Tools != nil}
	body, err := json.Marshal(start)
	if err != nil {
		return nil, engine.Refuse(x.t, failure.Internal, "the program could not be encoded")
	}
	req, err := x.s.request(streamCtx, http.MethodPost, PathExecutions, body)
	if err != nil {
		return nil, engine.Refuse(x.t, failure.BackendUnavailable, "nothing was sent: "+err.Error())
	}
	x.secret, _ = strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	type answer struct {
		resp *http.Response
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := x.s.client.Do(req)
		got <- answer{resp, err}
	}()
	select {
	case a := <-got:
		if a.err != nil {
			// A connection that was never made ran nothing; any other failure may have come
			// after the service started the program.
			var op *net.OpError
			sent := !(errors.As(a.err, &op) && op.Op == "dial")
			return nil, x.providerError(sent, "the sandbox service could not be reached: "+transportError(a.err))
		}
		return a.resp, nil
	case <-ctx.Done():
		endStream()
		drainBody((<-got).resp)
		return nil, x.ended(failure.Cancelled, nil)
	case <-deadline.C:
		endStream()
		drainBody((<-got).resp)
		return nil, x.ended(failure.Timeout, nil)
	}
}

// open says why resp is not the execution's frame stream, or returns nil.
func (x *execution) open(resp *http.Response) *engine.Outcome {
	if resp.StatusCode != http.StatusOK {
		return x.providerError(false, answerError(resp))
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != ContentType {
		return x.providerError(false, fmt.Sprintf("the sandbox service answered 200 with %q, not an %s frame stream", x.quote(mt), ContentType))
	}
	return nil
}

// frames are what the reading goroutine hands the execution: each frame it must act on (or
// the error that ended the stream); alive, for a frame the reader took itself (every data
// frame after the first), so a slow but live delivery is not idle. Closing stop ends the
// reader; done is closed when it has.
type frames struct {
	events chan streamEvent
	alive  chan struct{}
	stop   chan struct{}
	done   chan struct{}
}

// read starts the goroutine that reads body, splits it into frames within the Bounds and
// checks them against the stream's grammar (x.st).
func (x *execution) read(body io.Reader) *frames {
	x.st = newStream(x.s.opts.MaxOutputBytes, int(x.s.opts.PreviewBytes), x.s.opts.Artifacts.MaxBytes)
	x.st.secret = x.secret
	r := &frames{events: make(chan streamEvent), alive: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		fr := newFrameReader(body, x.s.opts.Bounds)
		for {
			line, err := fr.next()
			var f any
			if err == nil {
				if f, err = x.st.frame(line); err == nil && f == nil {
					select {
					case r.alive <- struct{}{}:
					default:
					}
					continue
				}
			}
			select {
			case r.events <- streamEvent{f, err}:
			case <-r.stop:
				return
			}
			switch f.(type) {
			case *ResultFrame, *ErrorFrame:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return r
}

// follow acts on the stream's frames until one of them, the idle timer, the deadline or ctx
// ends the execution. Calls run under callCtx.
func (x *execution) follow(ctx, callCtx context.Context, r *frames, deadline *time.Timer) *engine.Outcome {
	idleFor := x.s.opts.IdleTimeout
	idle := time.NewTimer(idleFor)
	defer idle.Stop()
	delivering := false
	for {
		select {
		case ev := <-r.events:
			idle.Reset(idleFor)
			if ev.err != nil {
				return x.broken(ev.err)
			}
			if _, ok := ev.f.(dataStarted); ok {
				// The program has ended: what is left is delivering its output.
				delivering = true
				deadline.Reset(x.s.opts.TransferTimeout)
			}
			if res := x.onFrame(callCtx, ev.f, r); res != nil {
				return res
			}
		case <-r.alive:
			idle.Reset(idleFor)
		case <-idle.C:
			return x.providerError(x.id != "", fmt.Sprintf("the sandbox service sent nothing for %s", idleFor))
		case <-deadline.C:
			if delivering {
				return x.providerError(true, fmt.Sprintf("the sandbox service did not deliver the program's output within %s", x.s.opts.TransferTimeout))
			}
			return x.end(failure.Timeout, r)
		case <-ctx.Done():
			return x.end(failure.Cancelled, r)
		}
	}
}

// onFrame acts on one frame of the stream, and returns the Outcome when it ends the
// execution.
func (x *execution) onFrame(callCtx context.Context, f any, r *frames) *engine.Outcome {
	switch f := f.(type) {
	case *Accepted:
		x.id = f.Execution
		x.log = x.log.With("execution", x.id)
		x.log.Debug("execution accepted")
	case *ErrorFrame:
		return x.refused(f)
	case *Progress:
		if x.ex.Progress != nil {
			x.ex.Progress(time.Since(x.start).Seconds(), nil) // its output comes at the end
		}
	case *wire.Call, *wire.Read:
		x.called = true
		x.calls.Dispatch(callCtx, f.(wire.Frame))
	case *ResultFrame:
		<-r.done
		return x.finish(&f.Outcome)
	}
	return nil
}

// broken is the Outcome of a stream that failed before its result: one that broke the
// protocol, ended early, or whose connection failed.
func (x *execution) broken(err error) *engine.Outcome {
	var v *violation
	switch {
	case errors.As(err, &v):
		return x.providerError(x.id != "", "the sandbox service's stream broke the protocol: "+v.msg)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return x.providerError(x.id != "", "the sandbox service's stream ended before the program did")
	}
	return x.providerError(x.id != "", "the sandbox service's stream failed before the program ended: "+transportError(err))
}

// reply posts the answer to one call or read, through the caller's ToolCaller (engine.Calls,
// at most MaxConcurrentCalls at a time: waiting for a slot holds the stream back).
func (x *execution) reply(ctx context.Context, out *wire.Result) {
	out.Type = wire.TypeResult
	x.post(ctx, resultsPath(x.id), out)
}

// post delivers a reply or a cancel. A failure is logged: the execution's own stream (a
// service that went away breaks it too) and its clocks decide how it ends.
func (x *execution) post(ctx context.Context, path string, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		x.log.Error("a reply could not be encoded", "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := x.s.request(ctx, http.MethodPost, path, body)
	if err != nil {
		x.log.Warn("not posted to the sandbox service", "route", path, "err", err)
		return
	}
	resp, err := x.s.client.Do(req)
	if err != nil {
		x.log.Warn("not posted to the sandbox service", "route", path, "err", transportError(err))
		return
	}
	defer drainBody(resp)
	if resp.StatusCode/100 != 2 {
		x.log.Warn("the sandbox service refused a post", "route", path, "answer", x.scrub(answerError(resp)))
	}
}

// end ends an execution the caller cancelled or the client's clock timed out: it posts a
// cancel, waits CancelGrace for the service's last result to keep the program's output, and
// reports kind.
func (x *execution) end(kind failure.Kind, r *frames) *engine.Outcome {
	x.ending = kind
	var wg sync.WaitGroup
	graceCtx, cancel := context.WithTimeout(context.Background(), x.s.opts.CancelGrace)
	defer func() {
		cancel()
		wg.Wait()
	}()
	if x.id != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x.post(graceCtx, cancelPath(x.id), struct{}{})
		}()
	}
	for {
		select {
		case ev := <-r.events:
			if f, ok := ev.f.(*ResultFrame); ok {
				<-r.done
				return x.ended(kind, &f.Outcome)
			}
			if ev.err != nil || ev.f == nil {
				return x.ended(kind, nil)
			}
			if _, ok := ev.f.(*ErrorFrame); ok {
				return x.ended(kind, nil)
			}
		case <-graceCtx.Done():
			return x.ended(kind, nil)
		}
	}
}

// ended is the result of a timeout or a cancellation: the service's own last result when it
// came in time (for the output the program wrote before it was killed), with the kind that
// ended it.
func (x *execution) ended(kind failure.Kind, r *engine.Outcome) *engine.Outcome {
	x.ending = kind
	res := engine.Refuse(x.t, kind, "")
	if r != nil {
		if got := x.finish(r); got.Failure == nil || got.Failure.Kind != failure.ProviderError {
			res = got
		}
	}
	res.Value = json.RawMessage("null")
	res.LimitHit = nil
	res.Cancelled = kind == failure.Cancelled
	res.Failure = &engine.Failure{Kind: kind, Executed: true}
	if kind == failure.Timeout {
		l := engine.LimitWall
		res.LimitHit = &l
		res.Failure.Message = fmt.Sprintf("the program did not finish within wall_seconds=%g; the sandbox service was told to cancel it", x.t.WallSeconds)
	} else {
		res.Failure.Message = "the request was cancelled; the sandbox service was told to kill the program and every process it started"
	}
	return res
}

// refused is the result of an error frame: the service would not run the program.
func (x *execution) refused(f *ErrorFrame) *engine.Outcome {
	k := failure.Kind(f.Kind)
	if !k.Refusal() {
		return x.providerError(false, "the sandbox service declined the execution: "+boundMessage(x.scrub(f.Message)))
	}
	return engine.Refuse(x.t, k, "the sandbox service refused: "+boundMessage(x.scrub(f.Message)))
}

// scrub removes the credential from what the service said: a service holds it, and a hostile
// one could echo it into an error or an output that would otherwise reach a record. It goes
// before any cut (quote, boundMessage), which could leave a piece of it. Only the credential
// as it is: a hostile service can always send it encoded (docs/design.md §7.6).
func (x *execution) scrub(s string) string {
	if x.secret == "" || !strings.Contains(s, x.secret) {
		return s
	}
	return string(scrubbed([]byte(s), x.secret))
}

func (x *execution) scrubBytes(b []byte) []byte {
	if x.secret == "" || !bytes.Contains(b, []byte(x.secret)) {
		return b
	}
	return scrubbed(b, x.secret)
}

// credentialMark stands where a credential was.
const credentialMark = "[credential]"

// scrubbed returns b without secret. The mark cannot form the secret with what surrounds it
// unless the secret holds a bracket or is part of the mark; such a secret is removed instead,
// again until none is left (each round shortens b, so it ends).
func scrubbed(b []byte, secret string) []byte {
	if !strings.ContainsAny(secret, "[]") && !strings.Contains(credentialMark, secret) {
		return bytes.ReplaceAll(b, []byte(secret), []byte(credentialMark))
	}
	for bytes.Contains(b, []byte(secret)) {
		b = bytes.ReplaceAll(b, []byte(secret), nil)
	}
	return b
}

// quote is a string of the service's for a message: scrubbed, then cut.
func (x *execution) quote(s string) string { return truncate(x.scrub(s)) }

// providerError is the result of a service that failed to deliver the execution. executed
// is whether the program may have started.
func (x *execution) providerError(executed bool, msg string) *engine.Outcome {
	msg = x.scrub(msg)
	x.log.Warn("remote execution failed", "err", msg)
	res := engine.Refuse(x.t, failure.ProviderError, msg+"; it is not retried")
	res.Failure.Executed = executed
	return res
}

func boundMessage(m string) string {
	if len(m) > 1000 {
		m = m[:1000] + "…"
	}
	return m
}
