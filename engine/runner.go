package engine

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/egress"
	"github.com/mcp-sandbox/mcp-sandbox/engine/bootstrap"
	"github.com/mcp-sandbox/mcp-sandbox/engine/wire"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
)

// RunnerOptions configure a Runner; nil means defaults, and so does the zero value of each field.
type RunnerOptions struct {
	// Ceiling is the profile's hard limits: no execution runs above them.
	Ceiling Limits
	// Fallback, when set, says why this profile's backend runs below the isolated level it
	// would have taken where it could (`backend: local` on a desktop with no container engine
	// answering): every Outcome carries it (Outcome.IsolationFallback).
	Fallback string
	// Isolation is the least level the profile must reach; an execution never runs below it.
	Isolation Level
	// AllowNetwork is the profile's network grant; without it, a request for network is refused.
	AllowNetwork bool
	// Egress is the profile's network rules: an execution whose terms ask for network rules
	// runs with a proxy of its own enforcing them (a copy of this policy), and is refused
	// without one.
	Egress *egress.Policy
	// AllowSameUID accepts a child that runs as the host's own user even without a kernel
	// boundary around it; behind one (Requirements) it is accepted anyway.
	AllowSameUID bool
	// IdentityAdvice is appended to a refusal for want of an identity: how this host could
	// give the child one (a subordinate id range, user namespaces), from cmd/'s detection.
	IdentityAdvice string
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
	// Warm sizes the pools of children started ahead of demand, per owner and terms, so an
	// execution does not wait for an interpreter to start (default: none). Each child runs one
	// program; its containment is graded for the execution that takes it.
	Warm WarmPolicy
	// HelloTimeout bounds the wait for the child's first frame (default 10 s, and never more
	// than the wall clock).
	HelloTimeout time.Duration
	// StateDir is where the Runner writes its canary; default a fresh directory under the
	// system temporary directory.
	StateDir string
}

// Runner is the engine's Sandbox over a local Backend: it speaks the protocol, grades what
// the child reports, refuses before running, enforces the wall clock and turns every ending
// into an Outcome. It is safe for concurrent use.
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

	mu           sync.Mutex // guards desc, pools, pre, hits, misses and closed
	desc         *Description
	pools        map[poolKey]*warmPool
	pre          *prestarted // Prestart's child, until a Run takes it
	hits, misses uint64
	closed       bool

	starts     chan struct{}  // a slot per background start in progress (startsAtOnce)
	stop       chan struct{}  // closed by Close: ends tend and the starts waiting for a slot
	background sync.WaitGroup // warm starts and discards in flight
	tending    sync.WaitGroup // tend
}

// NewRunner returns a Runner over b. Close releases its listeners and state directory. The
// Runner owns b: when b is an io.Closer, the Runner's Close closes it, and so does a failed
// NewRunner.
func NewRunner(b Backend, options *RunnerOptions) (*Runner, error) {
	var opts RunnerOptions
	if options != nil {
		opts = *options
	}
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
	if opts.Artifacts.InlineBytes <= 0 {
		opts.Artifacts.InlineBytes = opts.PreviewBytes
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
	if opts.Warm.Idle <= 0 {
		opts.Warm.Idle = 5 * time.Minute
	}
	if opts.Warm.Min < 0 || opts.Warm.Max < opts.Warm.Min {
		return nil, fmt.Errorf("warm pool: want 0 <= min <= max, got min %d, max %d", opts.Warm.Min, opts.Warm.Max)
	}
	r := &Runner{backend: b, opts: opts, stateDir: opts.StateDir, pools: map[poolKey]*warmPool{},
		starts: make(chan struct{}, startsAtOnce()), stop: make(chan struct{})}
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
	if r.warmOn() {
		r.tending.Add(1)
		go r.tend()
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
	r.closePools()
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

// argv is the interpreter's argv: the bootstrap and its arguments. A warm child, whose program
// may be a while coming, imports what programs commonly need once its hello is sent.
func (r *Runner) argv(warm bool) []string {
	mode := "cold"
	if warm {
		mode = "warm"
	}
	return []string{"-I", "-c", bootstrap.Source, r.canary, strconv.Itoa(r.port4), strconv.Itoa(r.port6),
		strconv.Itoa(r.opts.MaxFrame - 64<<10), mode}
}

// Run runs one program. Every ending, refusals included, is an Outcome.
func (r *Runner) Run(ctx context.Context, ex Execution) *Outcome {
	start := time.Now()
	t := r.Terms(ex.Terms)
	res := r.run(ctx, ex, t)
	res.DurationSeconds = time.Since(start).Seconds()
	res.IsolationFallback = r.opts.Fallback
	return res
}

func (r *Runner) run(ctx context.Context, ex Execution, t Terms) *Outcome {
	if err := t.Limits.Validate(); err != nil {
		return Refuse(t, failure.BackendUnavailable, "the terms are invalid: "+err.Error())
	}
	if why := NetworkRefusal(t.Network, r.opts.AllowNetwork, r.opts.Egress != nil); why != "" {
		return Refuse(t, failure.NetworkUnavailable, why)
	}
	if t.Network == NetworkRules {
		if eb, ok := r.backend.(EgressBackend); !ok || !eb.EgressByRules() {
			return Refuse(t, failure.NetworkUnavailable, "network by rules was requested, but the "+r.backend.Name()+
				" backend cannot make the egress proxy a program's only route out (the namespaces backend can); nothing ran")
		}
	}
	if err := ctx.Err(); err != nil {
		res := Refuse(t, failure.Cancelled, "the request was cancelled before the program started")
		res.Cancelled = true
		return res
	}
	k := poolKey{owner: ex.Owner, terms: t}
	p, start := r.takePrestarted(ctx, k), StartCold // started for this execution, only earlier
	if p == nil {
		p, start = r.takeWarm(ctx, k), StartWarm
	}
	if p == nil {
		start = StartCold
		var err error
		if p, err = r.prepare(ctx, ex.Owner, t, false); err != nil {
			k, msg := RefusalOf(err)
			return Refuse(t, k, fmt.Sprintf("the %s backend could not start the sandbox: %s", r.backend.Name(), msg))
		}
	}
	ses := &session{r: r, ex: ex, t: t, p: p, res: emptyOutcome(t)}
	ses.res.Start = start
	ses.res.Started = &StartInfo{Kind: StartExec}
	if f := p.child.Facts().Forked; f != nil {
		ses.res.Started = f
	}
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
	waited         chan struct{}      // closed when the goroutine waiting for the child ends
	cancel         context.CancelFunc // stops the reader
	ca             *egress.CA         // the execution's CA, under network rules
}

// prepare starts a child for terms t and begins reading its frames; warm says it is started
// ahead of its execution. The child lives until an execution drives it or discard ends it,
// independently of ctx once started.
func (r *Runner) prepare(ctx context.Context, owner string, t Terms, warm bool) (*prepared, error) {
	p := &prepared{
		stdout:     outputs.NewCapture(r.opts.MaxBytes, r.opts.PreviewBytes),
		stderr:     outputs.NewCapture(r.opts.MaxBytes, r.opts.PreviewBytes),
		frames:     make(chan frameOrErr, 1),
		readerDone: make(chan struct{}),
		exited:     make(chan Exit, 1),
		waited:     make(chan struct{}),
	}
	spec := LaunchSpec{Terms: t, Argv: r.argv(warm), Stdout: p.stdout, Stderr: p.stderr, Ahead: warm,
		Owner: owner, Pooled: r.warmOn()}
	if t.Network == NetworkRules {
		ca, err := egress.NewCA()
		if err != nil {
			return nil, fmt.Errorf("minting the execution's CA: %w", err)
		}
		p.ca, spec.Egress = ca, &EgressLaunch{CAPEM: ca.PEM()}
	}
	child, err := r.backend.Start(ctx, spec)
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
	go func() { defer close(p.waited); p.exited <- child.Wait() }()
	return p, nil
}

// reaped waits for prepare's two goroutines once the child is closed: the reader (its channel
// is closed) and the waiter (Close killed what was left, so Wait returns; bounded all the
// same, since a child that outlives SIGKILL must not hold the host). A tree Close reported
// escaped may hold its main process for ever: its waiter is left to end when that does.
func (p *prepared) reaped(tree TreeUsage) {
	<-p.readerDone
	if tree.Escaped {
		return
	}
	select {
	case <-p.waited:
	case <-time.After(5 * time.Second):
	}
}

// dead reports whether the child has exited (a warm one that died waiting).
func (p *prepared) dead() bool {
	select {
	case <-p.waited:
		return true
	default:
		return false
	}
}

// discard ends a prepared child that will never run a program.
func (p *prepared) discard() {
	p.child.Kill()
	p.cancel()
	tree := p.child.Close()
	p.child.Channel().Close()
	p.reaped(tree)
}

// unmet lists what a graded child lacks for terms t, the identity's with this host's advice.
func (r *Runner) unmet(t Terms, gr grading) []Requirement {
	reqs := Requirements(t, r.opts.AllowSameUID || gr.boundary)
	if gr.noMemoryCap && !t.Isolation.AtLeast(LevelIsolated) {
		reqs = slices.DeleteFunc(reqs, func(q Requirement) bool { return q.Dimension == DimMemory })
	}
	if len(gr.lacking) > 0 && !t.Isolation.AtLeast(LevelIsolated) {
		reqs = slices.DeleteFunc(reqs, func(q Requirement) bool { return slices.Contains(gr.lacking, q.Dimension) })
	}
	unmet := Unmet(gr.guarantees, reqs)
	for i := range unmet {
		if unmet[i].Dimension == DimIdentity && r.opts.IdentityAdvice != "" {
			unmet[i].Why += "; " + r.opts.IdentityAdvice
		}
	}
	return unmet
}
