package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine/bootstrap"
	"github.com/mcp-sandbox/mcp-sandbox/engine/wire"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
)

// RunnerOptions configure a Runner. The zero value of each field means its default.
type RunnerOptions struct {
	// Ceiling is the profile's hard limits: no execution runs above them.
	Ceiling Limits
	// Isolation is the least level the profile must reach; an execution never runs below it.
	Isolation Level
	// AllowNetwork is the profile's network grant; without it, a request for network is refused.
	AllowNetwork bool
	// AllowSameUID accepts a child that runs as the host's own user.
	AllowSameUID bool
	// EnvAllowlist names the host variables the backend passes on; the environment grade
	// accepts exactly these besides the backend's own.
	EnvAllowlist []string
	// PreviewBytes and MaxBytes bound each output stream (defaults 4000 and 8 MiB).
	PreviewBytes, MaxBytes int64
	// MaxFrame bounds one frame from the child (default wire.DefaultMaxFrame).
	MaxFrame int
	// MaxConcurrentCalls bounds the binding calls one execution has in flight (default 16).
	MaxConcurrentCalls int
	// Artifacts says whether files the program leaves in its workspace come back.
	Artifacts ArtifactPolicy
	// Warm is how many idle children to keep started, per distinct terms, so an execution
	// does not wait for an interpreter to start (default 0: none). Each is used once.
	Warm int
	// HelloTimeout bounds the wait for the child's first frame (default 10 s, and never more
	// than the wall clock).
	HelloTimeout time.Duration
	// StateDir is where the Runner writes its canary; default a fresh directory under the
	// system temporary directory.
	StateDir string
}

// Runner is the engine's Sandbox over a local Backend: it speaks the protocol, grades what
// the child reports, refuses before running, enforces the wall clock and turns every ending
// into a Result. It is safe for concurrent use.
type Runner struct {
	backend Backend
	opts    RunnerOptions

	stateDir string
	ownState bool
	canary   string
	l4, l6   net.Listener
	port4    int
	port6    int
	accepted sync.WaitGroup

	mu         sync.Mutex // guards desc, warm, starting and closed
	desc       *Description
	warm       map[Terms][]*prepared
	starting   map[Terms]int
	closed     bool
	background sync.WaitGroup // refills in flight
}

// NewRunner returns a Runner over b. Close releases its listeners and state directory. The
// Runner owns b: when b is an io.Closer, the Runner's Close closes it, and so does a failed
// NewRunner.
func NewRunner(b Backend, opts RunnerOptions) (*Runner, error) {
	r, err := newRunner(b, opts)
	if err != nil {
		if c, ok := b.(io.Closer); ok {
			c.Close()
		}
		return nil, err
	}
	return r, nil
}

func newRunner(b Backend, opts RunnerOptions) (*Runner, error) {
	if opts.Ceiling == (Limits{}) {
		opts.Ceiling = DefaultLimits
	}
	if err := opts.Ceiling.Validate(); err != nil {
		return nil, fmt.Errorf("hard limits: %w", err)
	}
	if opts.PreviewBytes <= 0 {
		opts.PreviewBytes = 4000
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 8 << 20
	}
	if opts.MaxFrame <= 0 {
		opts.MaxFrame = wire.DefaultMaxFrame
	}
	if opts.MaxConcurrentCalls <= 0 {
		opts.MaxConcurrentCalls = 16
	}
	if opts.Isolation == "" {
		opts.Isolation = LevelProcess
	}
	if opts.HelloTimeout <= 0 {
		opts.HelloTimeout = 10 * time.Second
	}
	r := &Runner{backend: b, opts: opts, stateDir: opts.StateDir, warm: map[Terms][]*prepared{}, starting: map[Terms]int{}}
	if r.stateDir == "" {
		d, err := os.MkdirTemp("", "mcp-sandbox-state-")
		if err != nil {
			return nil, err
		}
		r.stateDir, r.ownState = d, true
	}
	// The canary's directory and file are readable by anyone: only containment, never file
	// permissions, may keep the child from reading it, or its grade would be a false pass.
	if err := os.Chmod(r.stateDir, 0o755); err != nil {
		r.Close()
		return nil, err
	}
	r.canary = filepath.Join(r.stateDir, "canary-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.WriteFile(r.canary, []byte("mcp-sandbox canary: a sandboxed program must not read this\n"), 0o644); err != nil {
		r.Close()
		return nil, err
	}
	_ = os.Chmod(r.canary, 0o644)
	r.l4, r.port4 = listen("tcp4", "127.0.0.1:0")
	r.l6, r.port6 = listen("tcp6", "[::1]:0")
	for _, l := range []net.Listener{r.l4, r.l6} {
		if l != nil {
			r.accepted.Add(1)
			go r.acceptAndClose(l)
		}
	}
	return r, nil
}

func listen(network, addr string) (net.Listener, int) {
	l, err := net.Listen(network, addr)
	if err != nil {
		return nil, 0 // no such family here: the probe skips it
	}
	return l, l.Addr().(*net.TCPAddr).Port
}

func (r *Runner) acceptAndClose(l net.Listener) {
	defer r.accepted.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}

// Close ends the warm children and releases the Runner's listeners and state, and closes the
// backend when it is an io.Closer (the Runner owns the backend it was given). It is
// idempotent; executions in flight must have returned.
func (r *Runner) Close() error {
	r.mu.Lock()
	r.closed = true
	warm := r.warm
	r.warm = nil
	r.mu.Unlock()
	r.background.Wait()
	for _, ps := range warm {
		for _, p := range ps {
			p.discard()
		}
	}
	for _, l := range []net.Listener{r.l4, r.l6} {
		if l != nil {
			l.Close()
		}
	}
	r.accepted.Wait()
	if r.ownState && r.stateDir != "" {
		os.RemoveAll(r.stateDir)
	}
	if c, ok := r.backend.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// Terms narrows requested terms against the Runner's ceiling. A zero limit means "whatever
// the ceiling allows".
func (r *Runner) Terms(req Terms) Terms {
	t := Terms{Limits: r.opts.Ceiling.Narrow(req.Limits), Network: req.Network, Isolation: req.Isolation}
	if t.Network == "" {
		t.Network = NetworkNone
	}
	if t.Isolation == "" || !t.Isolation.AtLeast(r.opts.Isolation) {
		t.Isolation = r.opts.Isolation
	}
	return t
}

func (r *Runner) argv(t Terms) []string {
	return []string{"-I", "-c", bootstrap.Source, r.canary, strconv.Itoa(r.port4), strconv.Itoa(r.port6),
		strconv.Itoa(r.opts.MaxFrame - 64<<10)}
}

// Run runs one program. Every ending, refusals included, is a Result.
func (r *Runner) Run(ctx context.Context, ex Execution) *Result {
	start := time.Now()
	t := r.Terms(ex.Terms)
	res := r.run(ctx, ex, t)
	res.DurationSeconds = time.Since(start).Seconds()
	return res
}

func (r *Runner) run(ctx context.Context, ex Execution, t Terms) *Result {
	if err := t.Limits.Validate(); err != nil {
		return Refuse(t, failure.BackendUnavailable, "the terms are invalid: "+err.Error())
	}
	if t.Network == NetworkUnrestricted && !r.opts.AllowNetwork {
		return Refuse(t, failure.NetworkUnavailable,
			"network access was requested, but this sandbox profile does not allow network (allow_network: false); nothing ran")
	}
	if err := ctx.Err(); err != nil {
		res := Refuse(t, failure.Cancelled, "the request was cancelled before the program started")
		res.Cancelled = true
		return res
	}
	p := r.takeWarm(t)
	if p == nil {
		var err error
		if p, err = r.prepare(ctx, t); err != nil {
			k := failure.KindOf(err)
			if k == failure.Internal {
				k = failure.BackendUnavailable
			}
			msg := err.Error()
			var fe *failure.Error
			if errors.As(err, &fe) {
				msg = fe.Message
			}
			return Refuse(t, k, fmt.Sprintf("the %s backend could not start the sandbox: %s", r.backend.Name(), msg))
		}
	}
	defer r.refill(t)
	ses := &session{r: r, ex: ex, t: t, p: p, res: emptyResult(t)}
	ses.drive(ctx)
	return ses.res
}

// prepared is a started child whose first frame is being read: either for the execution at
// hand, or kept warm for the next one with the same terms.
type prepared struct {
	child          Child
	stdout, stderr *outputs.Capture
	frames         chan frameOrErr
	readerDone     chan struct{}
	exited         chan Exit
	cancel         context.CancelFunc // stops the reader
}

// prepare starts a child for terms t and begins reading its frames. The child lives until an
// execution drives it or discard ends it, independently of ctx once started.
func (r *Runner) prepare(ctx context.Context, t Terms) (*prepared, error) {
	p := &prepared{
		stdout:     outputs.NewCapture(r.opts.MaxBytes, r.opts.PreviewBytes),
		stderr:     outputs.NewCapture(r.opts.MaxBytes, r.opts.PreviewBytes),
		frames:     make(chan frameOrErr, 1),
		readerDone: make(chan struct{}),
		exited:     make(chan Exit, 1),
	}
	child, err := r.backend.Start(ctx, LaunchSpec{Terms: t, Argv: r.argv(t), Stdout: p.stdout, Stderr: p.stderr})
	if err != nil {
		return nil, err
	}
	p.child = child
	rctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go func() {
		defer close(p.readerDone)
		rd := wire.NewReader(child.Channel(), r.opts.MaxFrame)
		allowed := []string{wire.TypeHello}
		for {
			f, err := rd.ReadFrame(allowed...)
			select {
			case p.frames <- frameOrErr{f, err}:
			case <-rctx.Done():
				return
			}
			if err != nil {
				return
			}
			allowed = []string{wire.TypeCall, wire.TypeRead, wire.TypeDone}
		}
	}()
	go func() { p.exited <- child.Wait() }()
	return p, nil
}

// discard ends a prepared child that will never run a program.
func (p *prepared) discard() {
	p.child.Kill()
	p.cancel()
	p.child.Close()
	p.child.Channel().Close()
	<-p.readerDone
}

// maxWarmTerms bounds how many distinct terms keep warm children.
const maxWarmTerms = 4

// takeWarm returns an idle child started for exactly t, or nil.
func (r *Runner) takeWarm(t Terms) *prepared {
	r.mu.Lock()
	defer r.mu.Unlock()
	idle := r.warm[t]
	if len(idle) == 0 {
		return nil
	}
	p := idle[0]
	r.warm[t] = idle[1:]
	return p
}

// Prewarm starts the warm children for terms t now, rather than after the first execution
// under them. It does nothing when RunnerOptions.Warm is zero.
func (r *Runner) Prewarm(t Terms) { r.refill(r.Terms(t)) }

// refill starts, in the background, the children that keep RunnerOptions.Warm idle ones ready
// for terms t. A child is started only after the execution it replaces has ended, so a warm
// child never shares anything with an execution but the terms.
func (r *Runner) refill(t Terms) {
	if r.opts.Warm <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.warm == nil || len(r.warm[t])+r.starting[t] >= r.opts.Warm {
		return
	}
	if _, ok := r.warm[t]; !ok && len(r.warm) >= maxWarmTerms {
		return
	}
	r.starting[t]++
	r.background.Add(1)
	go func() {
		defer r.background.Done()
		p, err := r.prepare(context.Background(), t)
		r.mu.Lock()
		r.starting[t]--
		if err != nil || r.closed {
			r.mu.Unlock()
			if p != nil {
				p.discard()
			}
			return
		}
		r.warm[t] = append(r.warm[t], p)
		r.mu.Unlock()
	}()
}

// session is one execution in flight.
type session struct {
	r  *Runner
	ex Execution
	t  Terms
	p  *prepared // the child, its output captures and its frames
	// helloSeen: the child's first frame arrived, so the init helper's setup is behind it
	// and no exit status of the child can mean "setup failed" any more.
	helloSeen bool
	res       *Result

	w      *wire.Writer
	calls  sync.WaitGroup
	sem    chan struct{}
	cancel context.CancelFunc
}

type frameOrErr struct {
	f   wire.Frame
	err error
}

// drive runs the protocol to its end and fills s.res.
func (s *session) drive(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	defer s.cancel()
	ch := s.p.child.Channel()
	s.w = wire.NewWriter(ch)
	s.sem = make(chan struct{}, s.r.opts.MaxConcurrentCalls)

	defer s.p.cancel()
	frames, readerDone, exited := s.p.frames, s.p.readerDone, s.p.exited

	wall := time.Duration(s.t.WallSeconds * float64(time.Second))
	wallTimer := time.NewTimer(wall)
	defer wallTimer.Stop()
	// Binding calls, and every write to the child, end with the wall clock at the latest: a
	// child that stops reading its results cannot hold the host past it.
	deadline := time.Now().Add(wall)
	callCtx, cancelCalls := context.WithDeadline(ctx, deadline)
	defer cancelCalls()
	if d, ok := ch.(interface{ SetWriteDeadline(time.Time) error }); ok {
		_ = d.SetWriteDeadline(deadline)
	}
	helloTimeout := min(s.r.opts.HelloTimeout, wall)
	helloTimer := time.NewTimer(helloTimeout)
	defer helloTimer.Stop()
	var progress <-chan time.Time
	if s.ex.Progress != nil {
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		progress = tk.C
	}
	started := time.Now()

	var (
		done       *wire.Done
		exit       *Exit
		ending     *Failure // set when the host ends the execution
		limit      *LimitName
		channelEOF <-chan time.Time
	)
loop:
	for {
		select {
		case fe := <-frames:
			if fe.err != nil {
				if errors.Is(fe.err, io.EOF) || errors.Is(fe.err, io.ErrUnexpectedEOF) || isClosed(fe.err) {
					// The child closed its end: give its exit a moment to explain why.
					frames = nil
					if exit != nil {
						break loop
					}
					channelEOF = time.After(500 * time.Millisecond)
					continue
				}
				ending = violationFailure(fe.err, s.helloSeen)
				break loop
			}
			switch f := fe.f.(type) {
			case *wire.Hello:
				s.helloSeen = true
				helloTimer.Stop()
				if refusal := s.accept(f); refusal != nil {
					_ = s.w.WriteFrame(&wire.Abort{Kind: string(refusal.Kind), Reason: refusal.Message})
					ending = refusal
					break loop
				}
			case *wire.Call:
				s.call(callCtx, f)
			case *wire.Read:
				s.read(callCtx, f)
			case *wire.Done:
				done = f
				break loop
			}
		case e := <-exited:
			// Frames the child wrote before it exited may still be queued: read them first.
			exit = &e
			exited = nil
			if frames == nil {
				break loop
			}
			channelEOF = time.After(time.Second)
		case <-channelEOF:
			if exit != nil {
				break loop
			}
			ending = &Failure{Kind: failure.ProtocolViolation, Executed: s.helloSeen,
				Message: "the sandbox child closed its channel to the host and kept running; it was killed"}
			break loop
		case <-helloTimer.C:
			ending = &Failure{Kind: failure.BackendUnavailable,
				Message: fmt.Sprintf("the sandbox child did not report its containment within %s; nothing ran", helloTimeout)}
			break loop
		case <-wallTimer.C:
			ending = &Failure{Kind: failure.Timeout, Executed: s.helloSeen,
				Message: fmt.Sprintf("the program did not finish within wall_seconds=%g and was killed", s.t.WallSeconds)}
			limit = limitPtr(LimitWall)
			break loop
		case <-ctx.Done():
			ending = &Failure{Kind: failure.Cancelled, Executed: s.helloSeen,
				Message: "the request was cancelled; the program and every process it started were killed"}
			s.res.Cancelled = true
			break loop
		case <-progress:
			s.ex.Progress(time.Since(started).Seconds())
		}
	}

	if done != nil && s.r.opts.Artifacts.Collect {
		// The interpreter waits after done until the host closes the channel, so the workspace
		// (and a namespace holding it) is still there to collect from.
		if ws := s.p.child.Workspace(); ws != "" {
			s.res.Artifacts, s.res.ArtifactFiles, s.res.ArtifactsOmit = collectArtifacts(ws, s.r.opts.Artifacts)
		} else {
			s.res.ArtifactsOmit = append(s.res.ArtifactsOmit, OmittedFile{Path: ".",
				Reason: "the " + s.r.backend.Name() + " backend cannot show its workspace to the host; nothing was collected"})
		}
	}
	s.p.child.Kill()
	s.cancel()
	s.p.cancel()
	s.calls.Wait()
	if exit == nil && exited != nil {
		select {
		case e := <-exited:
			exit = &e
		case <-time.After(5 * time.Second):
			exit = &Exit{Code: -1, Err: errors.New("the child did not exit after SIGKILL")}
		}
	}
	tree := s.p.child.Close()
	s.p.child.Channel().Close()
	<-readerDone
	s.finish(done, exit, ending, limit, tree)
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
	if !gr.isolation.AtLeast(s.t.Isolation) {
		return &Failure{Kind: failure.IsolationUnavailable, Message: fmt.Sprintf(
			"isolation %q was required, but the %s backend reached only %q here; nothing ran",
			s.t.Isolation, s.r.backend.Name(), gr.isolation)}
	}
	if unmet := Unmet(gr.guarantees, Requirements(s.t, s.r.opts.AllowSameUID)); len(unmet) > 0 {
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
	names := append([]string(nil), s.ex.ToolNames...)
	run := &wire.Run{Program: s.ex.Program, Tools: names, Aliases: Aliases(names)}
	if run.Tools == nil {
		run.Tools = []string{}
	}
	if err := s.w.WriteFrame(run); err != nil {
		return &Failure{Kind: failure.BackendUnavailable, Message: "the sandbox child went away before the program was sent: " + err.Error()}
	}
	return nil
}

func (s *session) call(ctx context.Context, c *wire.Call) {
	s.dispatch(ctx, c.ID, func(ctx context.Context) ToolReply {
		// The ToolCaller is the authority on names: it answers a name outside ToolNames with
		// the precise kind (denied, excluded_builtin, unavailable), which a blanket refusal
		// here would hide.
		if s.ex.Tools == nil {
			return ToolReply{Kind: "unavailable", Message: fmt.Sprintf("no tool named %q is offered to this program; TOOLS lists what is", c.Tool)}
		}
		return s.ex.Tools.CallTool(ctx, c.Tool, c.Args)
	})
}

func (s *session) read(ctx context.Context, rd *wire.Read) {
	s.dispatch(ctx, rd.ID, func(ctx context.Context) ToolReply {
		if s.ex.Tools == nil {
			return ToolReply{Kind: "unavailable", Message: "no handle of this execution is known"}
		}
		return s.ex.Tools.ReadHandle(ctx, rd.Handle, rd.Offset, rd.Limit, rd.Pattern)
	})
}

// dispatch answers one call on its own goroutine, at most MaxConcurrentCalls at a time.
//
// The slot is taken here, on the protocol loop, before the next frame is read: a child that
// floods calls, or stops reading their results, is held back by its own channel instead of
// piling up goroutines and arguments on the host. Waiting for a slot ends with ctx (the wall
// clock), after which the loop notices the timeout.
func (s *session) dispatch(ctx context.Context, id int64, do func(context.Context) ToolReply) {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return
	}
	s.calls.Add(1)
	go func() {
		defer s.calls.Done()
		defer func() { <-s.sem }()
		rep := do(ctx)
		out := &wire.Result{ID: id, OK: rep.Kind == ""}
		if out.OK {
			if rep.Handle != nil {
				out.Handle = &wire.Handle{ID: rep.Handle.ID, Size: rep.Handle.Size, Lines: rep.Handle.Lines}
			} else {
				out.Value = rep.Value
				if out.Value == nil {
					out.Value = []byte("null")
				}
			}
		} else {
			out.Kind, out.Message = rep.Kind, rep.Message
		}
		if ctx.Err() == nil {
			_ = s.w.WriteFrame(out)
		}
	}()
}

// Aliases returns the names that get a direct alias in a program: exactly those that are
// ASCII Python identifiers and not keywords, never a mangled form. It is the same rule as
// upstream.Aliasable (engine may not import upstream): non-ASCII identifiers are reachable
// through call_tool only, so one rule holds without Python's Unicode tables.
func Aliases(names []string) []string {
	out := []string{}
	for _, n := range names {
		if isPythonIdentifier(n) && !pythonKeywords[n] {
			out = append(out, n)
		}
	}
	return out
}

// isPythonIdentifier reports whether s is an ASCII Python identifier.
func isPythonIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// pythonKeywords are the hard keywords of Python 3; soft keywords (match, case, type, _) are
// usable as names and keep their alias.
var pythonKeywords = map[string]bool{}

func init() {
	for _, k := range strings.Fields(`False None True and as assert async await break class continue
		def del elif else except finally for from global if import in is lambda nonlocal not or pass
		raise return try while with yield`) {
		pythonKeywords[k] = true
	}
}
