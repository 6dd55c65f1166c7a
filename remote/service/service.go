package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/wire"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/remote"
)

// LocalSandbox is what a service runs executions on: a local engine.Runner.
type LocalSandbox interface {
	engine.Sandbox
	// Terms narrows requested terms against the sandbox's ceiling.
	Terms(engine.Terms) engine.Terms
}

// Options configure a Service. The zero value of each field but Sandbox means its
// default.
type Options struct {
	Sandbox LocalSandbox
	// AllowNetwork is the service profile's network grant.
	AllowNetwork bool
	// Authenticate maps a bearer token to the principal it stands for; nil admits every
	// request (cmd allows that on a loopback listener only).
	Authenticate func(token string) (principal string, ok bool)
	// MaxExecutions bounds the executions running at once (default 16); past it a start is
	// answered 503.
	MaxExecutions int
	// Heartbeat is the interval of progress frames (default 1 s).
	Heartbeat time.Duration
	// MaxRequestBytes bounds a start request and a reply (default wire.DefaultMaxFrame).
	MaxRequestBytes int64
	// WriteTimeout bounds the write of one frame to a caller that stopped reading
	// (default 30 s); past it the execution is cancelled.
	WriteTimeout time.Duration
	// Logger receives the service's log (default slog.Default()).
	Logger *slog.Logger
}

// Service serves executions over the protocol: an http.Handler. It holds no upstream
// credential and no tool: every binding call goes back to the caller. It is safe for
// concurrent use.
type Service struct {
	opts  Options
	log   *slog.Logger
	mux   *http.ServeMux
	slots chan struct{}

	mu       sync.Mutex // guards execs and draining
	execs    map[string]*serviceExecution
	draining bool
	running  sync.WaitGroup // start handlers past admission
}

// New returns a Service over opts.Sandbox.
func New(options *Options) *Service {
	var opts Options
	if options != nil {
		opts = *options
	}
	if opts.MaxExecutions <= 0 {
		opts.MaxExecutions = 16
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = time.Second
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = wire.DefaultMaxFrame
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Service{opts: opts, log: opts.Logger, slots: make(chan struct{}, opts.MaxExecutions),
		execs: map[string]*serviceExecution{}, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET "+remote.PathDescribe, s.describe)
	s.mux.HandleFunc("POST "+remote.PathExecutions, s.start)
	s.mux.HandleFunc("POST "+remote.PathExecutions+"/{id}/results", s.results)
	s.mux.HandleFunc("POST "+remote.PathExecutions+"/{id}/cancel", s.cancel)
	s.mux.HandleFunc("GET "+remote.PathHealth, func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	s.mux.HandleFunc("GET "+remote.PathReady, s.ready)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such route; see the protocol's routes under /v"+strconv.Itoa(remote.Version))
	})
	return s
}

func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Drain stops admitting executions (starts are answered 503, /readyz turns 503), waits until
// the running ones end or ctx is done, then cancels what is left and waits for it (bounded).
// It reports whether every execution ended on its own.
func (s *Service) Drain(ctx context.Context) bool {
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.running.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-ctx.Done():
	}
	s.mu.Lock()
	for _, x := range s.execs {
		x.cancel()
	}
	s.mu.Unlock()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.log.Warn("executions still running after they were cancelled")
	}
	return false
}

func (s *Service) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

func writeError(w http.ResponseWriter, status int, kind, msg string) {
	var b remote.ErrorBody
	b.Error.Kind, b.Error.Message = kind, msg
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(b)
}

// Admits reports whether r carries a credential the service accepts (every request does when
// it has no tokens), whatever its route: the service's own decision, for what guards its
// listener (assembly's httpguard.Gate) to hand the connection on.
func (s *Service) Admits(r *http.Request) bool {
	_, ok := s.who(r)
	return ok
}

// who is the principal r's bearer token stands for ("" without tokens), or false.
func (s *Service) who(r *http.Request) (string, bool) {
	if s.opts.Authenticate == nil {
		return "", true
	}
	scheme, tok, found := strings.Cut(r.Header.Get("Authorization"), " ")
	if found && strings.EqualFold(scheme, "Bearer") && tok != "" {
		return s.opts.Authenticate(tok)
	}
	return "", false
}

// principal authenticates r, or answers 401.
func (s *Service) principal(w http.ResponseWriter, r *http.Request) (string, bool) {
	if p, ok := s.who(r); ok {
		return p, true
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="mcp-sandbox"`)
	writeError(w, http.StatusUnauthorized, "unauthorized", "a valid bearer token is required")
	return "", false
}

func (s *Service) describe(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.principal(w, r); !ok {
		return
	}
	d := *s.opts.Sandbox.Describe(r.Context())
	if s.isDraining() {
		d.Ready = false
		d.Problems = append(append([]string{}, d.Problems...), "the sandbox service is shutting down")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(remote.DescribeAnswer{Protocol: remote.Version, AllowNetwork: s.opts.AllowNetwork, Description: d})
}

func (s *Service) ready(w http.ResponseWriter, r *http.Request) {
	d := s.opts.Sandbox.Describe(r.Context())
	switch {
	case s.isDraining():
		http.Error(w, "draining", http.StatusServiceUnavailable)
	case !d.Ready:
		http.Error(w, "not ready: "+strings.Join(d.Problems, "; "), http.StatusServiceUnavailable)
	default:
		io.WriteString(w, "ready\n")
	}
}

// readBody reads a bounded JSON body into v, strictly and within bodyTimeout, or answers
// 400 or 413.
func (s *Service) readBody(w http.ResponseWriter, r *http.Request, v any) bool {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(bodyTimeout))
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxRequestBytes))
	// Cleared at once: the server's watch for a caller that hangs up reads the connection
	// too, and a deadline passing there would cancel the execution.
	_ = rc.SetReadDeadline(time.Time{})
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the body is over %d bytes", s.opts.MaxRequestBytes))
		return false
	case err != nil:
		writeError(w, http.StatusBadRequest, "bad_request", "the body could not be read")
		return false
	}
	if err := wire.Unmarshal(b, v); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "the body is malformed: "+err.Error())
		return false
	}
	return true
}

// admit counts a start in, unless the service is draining.
func (s *Service) admit() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return false
	}
	s.running.Add(1)
	return true
}

func (s *Service) start(w http.ResponseWriter, r *http.Request) {
	who, ok := s.principal(w, r)
	if !ok {
		return
	}
	if !s.admit() {
		writeError(w, http.StatusServiceUnavailable, "draining", "the sandbox service is shutting down")
		return
	}
	defer s.running.Done()
	// The body is read before a slot is taken, within a deadline, so a caller that sends it
	// slowly holds no slot.
	var req remote.StartRequest
	if !s.readBody(w, r, &req) {
		return
	}
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		writeError(w, http.StatusServiceUnavailable, "busy", fmt.Sprintf("the sandbox service is running %d executions, as many as it may", s.opts.MaxExecutions))
		return
	}
	if req.Protocol != remote.Version {
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("protocol %d is not spoken here; this service speaks %d", req.Protocol, remote.Version))
		return
	}
	w.Header().Set("Content-Type", remote.ContentType)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	fw := &frameWriter{w: w, rc: http.NewResponseController(w), timeout: s.opts.WriteTimeout, onFail: cancel}
	if kind, msg := s.refusal(ctx, req.Terms); kind != "" {
		w.WriteHeader(http.StatusOK)
		_ = fw.write(&remote.ErrorFrame{Type: remote.FrameError, Kind: string(kind), Message: msg})
		s.log.Info("execution refused before it ran", "kind", kind, "reason", msg)
		return
	}
	x := &serviceExecution{id: newExecutionID(), principal: who, cancel: cancel, done: make(chan struct{}),
		w: fw, pending: map[int64]chan *wire.Result{}}
	s.mu.Lock()
	s.execs[x.id] = x
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.execs, x.id)
		s.mu.Unlock()
	}()
	w.WriteHeader(http.StatusOK)
	if fw.write(&remote.Accepted{Type: remote.FrameAccepted, Execution: x.id}) != nil {
		return
	}
	s.run(ctx, x, &req)
}

// run runs x's program, with a heartbeat while it runs, and sends its result.
func (s *Service) run(ctx context.Context, x *serviceExecution, req *remote.StartRequest) {
	log := s.log.With("execution", x.id)
	log.Info("execution started", "isolation", req.Terms.Isolation, "wall_seconds", req.Terms.WallSeconds, "tools", len(req.Tools))
	started := time.Now()
	stopBeats := s.heartbeat(x.w, started)
	// Warm children are kept per principal: one caller's never run another's program.
	ex := engine.Execution{Program: req.Program, Terms: req.Terms, ToolNames: req.Tools, Aliases: req.Aliases, Signatures: req.Signatures, Owner: x.principal}
	if req.Calls {
		ex.Tools = forwarder{x}
	}
	res := s.opts.Sandbox.Run(ctx, ex)
	close(x.done)
	stopBeats()

	outcome := "completed"
	if res.Failure != nil {
		outcome = string(res.Failure.Kind)
	}
	if err := x.w.result(x.id, res); err != nil {
		log.Warn("the result could not be delivered: the caller went away", "outcome", outcome, "err", err)
		return
	}
	log.Info("execution ended", "outcome", outcome, "seconds", time.Since(started).Seconds())
}

// heartbeat writes a progress frame every Heartbeat until stop, which waits for it.
func (s *Service) heartbeat(fw *frameWriter, started time.Time) (stop func()) {
	var beats sync.WaitGroup
	done := make(chan struct{})
	beats.Add(1)
	go func() {
		defer beats.Done()
		tk := time.NewTicker(s.opts.Heartbeat)
		defer tk.Stop()
		for {
			select {
			case <-tk.C:
				_ = fw.write(&remote.Progress{Type: remote.FrameProgress, ElapsedSeconds: time.Since(started).Seconds()})
			case <-done:
				return
			}
		}
	}()
	return func() {
		close(done)
		beats.Wait()
	}
}

// refusal is why the service will not run an execution under terms, before anything runs.
func (s *Service) refusal(ctx context.Context, req engine.Terms) (failure.Kind, string) {
	if req.Network != "" && req.Network != engine.NetworkNone && req.Network != engine.NetworkUnrestricted {
		return failure.BackendUnavailable, fmt.Sprintf("unknown network %q", clip(string(req.Network)))
	}
	if _, err := engine.ParseLevel(string(req.Isolation)); err != nil {
		return failure.BackendUnavailable, err.Error()
	}
	d := s.opts.Sandbox.Describe(ctx)
	t := s.opts.Sandbox.Terms(req)
	switch {
	case !d.Ready:
		return failure.BackendUnavailable, "the service's sandbox is not ready: " + strings.Join(d.Problems, "; ")
	case !d.Isolation.AtLeast(t.Isolation):
		return failure.IsolationUnavailable, fmt.Sprintf("isolation %q was required, and this service reaches %q", t.Isolation, d.Isolation)
	case t.Network == engine.NetworkUnrestricted && !s.opts.AllowNetwork:
		return failure.NetworkUnavailable, engine.NetworkRefusal(t.Network, false, true)
	}
	if err := t.Limits.Validate(); err != nil {
		return failure.BackendUnavailable, "the terms are invalid: " + err.Error()
	}
	return "", ""
}

func (s *Service) lookup(w http.ResponseWriter, r *http.Request) *serviceExecution {
	who, ok := s.principal(w, r)
	if !ok {
		return nil
	}
	s.mu.Lock()
	x := s.execs[r.PathValue("id")]
	s.mu.Unlock()
	if x == nil || x.principal != who {
		writeError(w, http.StatusNotFound, "not_found", "no such execution is running")
		return nil
	}
	return x
}

func (s *Service) results(w http.ResponseWriter, r *http.Request) {
	x := s.lookup(w, r)
	if x == nil {
		return
	}
	rep := &wire.Result{}
	if !s.readBody(w, r, rep) {
		return
	}
	if err := checkReply(rep); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "the reply is malformed: "+err.Error())
		return
	}
	if !x.deliver(rep) {
		writeError(w, http.StatusConflict, "not_waiting", fmt.Sprintf("no call %d of this execution is waiting for a result", rep.ID))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// bodyTimeout bounds the read of a request's body.
const bodyTimeout = 30 * time.Second

// cancelWait bounds how long a cancel waits for the program's tree to be gone.
const cancelWait = 5 * time.Second

func (s *Service) cancel(w http.ResponseWriter, r *http.Request) {
	x := s.lookup(w, r)
	if x == nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 4<<10))
	x.cancel()
	select {
	case <-x.done:
	case <-time.After(cancelWait):
	}
	w.WriteHeader(http.StatusNoContent)
}

func newExecutionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "x" + hex.EncodeToString(b[:])
}

// serviceExecution is one execution running on the service.
type serviceExecution struct {
	id, principal string
	cancel        context.CancelFunc
	done          chan struct{} // closed when the program's Run has returned
	w             *frameWriter

	mu      sync.Mutex // guards pending
	pending map[int64]chan *wire.Result
}

// deliver hands rep to the call waiting for it, and reports whether one was.
func (x *serviceExecution) deliver(rep *wire.Result) bool {
	x.mu.Lock()
	ch, ok := x.pending[rep.ID]
	delete(x.pending, rep.ID)
	x.mu.Unlock()
	if ok {
		ch <- rep // buffered, and delivered once
	}
	return ok
}

// frameWriter writes one stream's frames, each flushed at once and bounded by a write
// deadline. The first failed write cancels the execution. It is safe for concurrent use.
type frameWriter struct {
	mu      sync.Mutex // guards everything below and the stream itself
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	onFail  func()
	err     error
	lastID  int64
	buf     []byte
}

func (fw *frameWriter) write(f any) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.encode(f)
}

// numbered writes the frame mk makes for the next call id.
func (fw *frameWriter) numbered(mk func(id int64) any) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	fw.lastID++
	return fw.encode(mk(fw.lastID))
}

func (fw *frameWriter) encode(f any) error {
	if fw.err != nil {
		return fw.err
	}
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	fw.buf = append(append(fw.buf[:0], b...), '\n')
	return fw.send()
}

func (fw *frameWriter) send() error {
	_ = fw.rc.SetWriteDeadline(time.Now().Add(fw.timeout))
	_, err := fw.w.Write(fw.buf)
	if err == nil {
		if err = fw.rc.Flush(); errors.Is(err, http.ErrNotSupported) {
			err = nil
		}
	}
	if err != nil {
		fw.err = err
		if fw.onFail != nil {
			fw.onFail()
		}
	}
	return err
}

// result writes the captured bytes as data frames, then the result frame.
func (fw *frameWriter) result(id string, res *engine.Outcome) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if err := fw.data("stdout", res.StdoutData, false); err != nil {
		return err
	}
	if err := fw.data("stderr", res.StderrData, false); err != nil {
		return err
	}
	for i, f := range res.ArtifactFiles {
		if i >= remote.MaxArtifacts || i >= len(res.Artifacts) {
			break
		}
		if err := fw.data(fmt.Sprintf("artifact:%d", i), f.Data, true); err != nil {
			return err
		}
	}
	if len(res.Artifacts) > remote.MaxArtifacts {
		res.Artifacts = res.Artifacts[:remote.MaxArtifacts]
	}
	return fw.encode(&remote.ResultFrame{Type: remote.FrameResult, Execution: id, Outcome: *res})
}

// data writes b in chunks; always at least one frame when always is set, so that an empty
// artifact is seen to have arrived.
func (fw *frameWriter) data(stream string, b []byte, always bool) error {
	for first := true; len(b) > 0 || (first && always); first = false {
		n := min(len(b), remote.DataChunk)
		fw.buf = remote.AppendData(fw.buf[:0], stream, b[:n])
		if err := fw.send(); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// clip shortens what a caller sent before it is quoted back.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
