package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/wire"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// Options configure a remote Sandbox. cmd builds them from a profile's remote block and
// limits. The zero value of each field but URL means its default.
type Options struct {
	// URL is the service's base URL; the routes are appended to its path.
	URL string
	// Bearer returns the credential for one request; it is called for every request and its
	// value is never kept, logged or put in an error. nil sends none.
	Bearer func(ctx context.Context) (string, error)
	// AllowInsecureHTTP permits a Bearer over plaintext http:// to a host that is not loopback.
	AllowInsecureHTTP bool

	// Ceiling is the profile's hard limits, narrowed further by the service's own.
	Ceiling engine.Limits
	// Isolation is the least level the profile must reach.
	Isolation engine.Level
	// AllowNetwork is the profile's network grant.
	AllowNetwork bool
	// MaxOutputBytes bounds what is kept of each output stream (default 8 MiB); the rest is
	// counted and dropped, and the stream marked truncated.
	MaxOutputBytes int64
	// PreviewBytes is the size of each output stream's preview (default 4000): the client
	// makes the previews from the bytes it received, never from the service's.
	PreviewBytes int64
	// Artifacts says whether artifacts the service collected are kept, and how many bytes.
	Artifacts engine.ArtifactPolicy

	// Bounds are what one stream may hold (frame, stream, lines, empty lines).
	Bounds Bounds
	// Slack is how long past its wall clock an execution's result may take to arrive before
	// the client ends it as a timeout (default 3 s).
	Slack time.Duration
	// TransferTimeout bounds the delivery of the output once the program has ended
	// (default 60 s).
	TransferTimeout time.Duration
	// IdleTimeout ends a stream that sends nothing, not even a heartbeat, for this long
	// (default 15 s); every frame, a data frame too, starts it again.
	IdleTimeout time.Duration
	// CancelGrace is how long, after posting a cancel, the client waits for the service's
	// final result to keep the output the program wrote before it was killed (default 750 ms).
	CancelGrace time.Duration
	// DescribeTTL is how long a description is reused (default 30 s).
	DescribeTTL time.Duration
	// DescribeAttempts is how many times a describe is tried (default 3). Nothing else is
	// ever retried.
	DescribeAttempts int
	// MaxConcurrentCalls bounds the binding calls of one execution answered at once
	// (default 16).
	MaxConcurrentCalls int
	// Transport carries the requests (default: a transport of its own, without proxies).
	Transport http.RoundTripper
	// Logger receives the operator's detail (default slog.Default()).
	Logger *slog.Logger
}

// Sandbox is the remote backend: an engine.Sandbox whose executions run on a sandbox
// service. It is safe for concurrent use.
type Sandbox struct {
	opts   Options
	base   *url.URL
	client *http.Client
	log    *slog.Logger

	mu     sync.Mutex // guards desc, descAt and closed
	desc   *DescribeAnswer
	descAt time.Time
	closed bool
}

// New checks opts and returns the Sandbox. It contacts nothing: Describe does.
func New(options *Options) (*Sandbox, error) {
	var opts Options
	if options != nil {
		opts = *options
	}
	u, err := serviceURL(&opts)
	if err != nil {
		return nil, err
	}
	if opts.Ceiling == (engine.Limits{}) {
		opts.Ceiling = engine.DefaultLimits
	}
	if err := opts.Ceiling.Validate(); err != nil {
		return nil, fmt.Errorf("hard limits: %w", err)
	}
	opts.fill()
	s := &Sandbox{opts: opts, base: u, log: opts.Logger.With("backend", "remote")}
	s.client = &http.Client{
		Transport: opts.Transport,
		// A redirect is never followed: the credential goes to the configured host only, and a
		// 3xx is a provider_error like any other answer but 200.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return s, nil
}

// serviceURL is opts' URL, checked: absolute http or https, no credentials, query or fragment
// in it, and a credential over plaintext only to loopback unless AllowInsecureHTTP.
func serviceURL(opts *Options) (*url.URL, error) {
	u, err := url.Parse(opts.URL)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return nil, failure.New(failure.BackendUnavailable, "the remote url must be an absolute http or https URL")
	case u.User != nil:
		return nil, failure.New(failure.BackendUnavailable, "the remote url must not carry credentials; use bearer")
	case u.RawQuery != "" || u.Fragment != "":
		return nil, failure.New(failure.BackendUnavailable, "the remote url must not carry a query or a fragment")
	case u.Scheme == "http" && opts.Bearer != nil && !opts.AllowInsecureHTTP && !loopback(u.Hostname()):
		return nil, failure.New(failure.BackendUnavailable,
			"a credential is refused over plaintext http to a host that is not loopback; use https, or set allow_insecure_http if the network in between is trusted")
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// fill sets the defaults of the fields left zero (the ceiling's aside).
func (opts *Options) fill() {
	if opts.Isolation == "" {
		opts.Isolation = engine.LevelProcess
	}
	if opts.MaxOutputBytes <= 0 {
		opts.MaxOutputBytes = 8 << 20
	}
	if opts.PreviewBytes <= 0 {
		opts.PreviewBytes = 4000
	}
	if opts.Artifacts.MaxFiles <= 0 {
		opts.Artifacts.MaxFiles = 64
	}
	if opts.Artifacts.MaxBytes <= 0 {
		opts.Artifacts.MaxBytes = 16 << 20
	}
	opts.Bounds = opts.Bounds.withDefaults()
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&opts.Slack, 3*time.Second)
	def(&opts.TransferTimeout, 60*time.Second)
	def(&opts.IdleTimeout, 15*time.Second)
	def(&opts.CancelGrace, 750*time.Millisecond)
	def(&opts.DescribeTTL, 30*time.Second)
	if opts.DescribeAttempts <= 0 {
		opts.DescribeAttempts = 3
	}
	if opts.MaxConcurrentCalls <= 0 {
		opts.MaxConcurrentCalls = 16
	}
	if opts.Transport == nil {
		opts.Transport = &http.Transport{
			// No proxy from the environment: the credential goes to the service and nowhere else.
			Proxy:                 nil,
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: 30 * time.Second,
			MaxIdleConnsPerHost:   16,
			IdleConnTimeout:       90 * time.Second,
			ForceAttemptHTTP2:     true,
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
}

func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Close releases idle connections. It is idempotent; executions in flight must have returned.
func (s *Sandbox) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	if c, ok := s.opts.Transport.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
	return nil
}

// Terms narrows requested terms against the profile's ceiling, as a local Runner does; the
// service narrows them again against its own.
func (s *Sandbox) Terms(req engine.Terms) engine.Terms {
	t := engine.Terms{Limits: s.opts.Ceiling.Narrow(req.Limits), Network: req.Network, Isolation: req.Isolation}
	if t.Network == "" {
		t.Network = engine.NetworkNone
	}
	if t.Isolation == "" || !t.Isolation.AtLeast(s.opts.Isolation) {
		t.Isolation = s.opts.Isolation
	}
	return t
}

// Prewarm does nothing: the service keeps its own warm children.
func (s *Sandbox) Prewarm(string, engine.Terms) {}

// credentialError is a credential that could not be resolved; its message names the
// reference, never a value.
type credentialError struct{ err error }

func (e *credentialError) Error() string {
	return "the credential could not be resolved: " + e.err.Error()
}

// request builds a request to the service with a freshly resolved credential.
func (s *Sandbox) request(ctx context.Context, method, path string, body []byte) (*http.Request, error) {
	u := *s.base
	u.Path += path
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if s.opts.Bearer != nil {
		tok, err := s.opts.Bearer(ctx)
		if err != nil {
			return nil, &credentialError{err}
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	return req, nil
}

// transportError describes a failed request without its URL.
func transportError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

// answerError describes a non-200 answer: its status and, when the body is the service's
// JSON error, its kind and message (bounded).
func answerError(resp *http.Response) string {
	msg := fmt.Sprintf("the sandbox service answered %s", resp.Status)
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return msg + "; redirects are never followed"
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
	var eb ErrorBody
	if json.Unmarshal(b, &eb) == nil && eb.Error.Message != "" {
		m := eb.Error.Message
		if len(m) > 500 {
			m = m[:500] + "…"
		}
		msg += ": " + strings.ToValidUTF8(m, "?")
	}
	return msg
}

// drain reads what is left of a body (bounded) and closes it, so the connection is reused.
func drainBody(resp *http.Response) {
	if resp == nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

// maxDescribeBytes bounds a describe answer.
const maxDescribeBytes = 1 << 20

// Describe reports what the service's backend is and can prove, as the service described it,
// narrowed by this profile's ceiling and checked against its level. It is cached for
// DescribeTTL; describing is the only request ever retried.
func (s *Sandbox) Describe(ctx context.Context) *engine.Description {
	a, err := s.describe(ctx)
	d := &engine.Description{Backend: "remote", Isolation: engine.LevelProcess, Guarantees: engine.Guarantees{},
		Mechanisms: []string{"remote-protocol-v1"}, Problems: []string{}, LimitCeiling: s.opts.Ceiling}
	if err != nil {
		d.Problems = append(d.Problems, "the sandbox service could not be described: "+err.Error())
		return d
	}
	sd := a.Description
	d.Isolation, d.Python = sd.Isolation, sd.Python
	for k, v := range sd.Guarantees {
		d.Guarantees[k] = v
	}
	d.Mechanisms = append(d.Mechanisms, "service-backend:"+sd.Backend)
	d.Mechanisms = append(d.Mechanisms, sd.Mechanisms...)
	d.LimitCeiling = s.opts.Ceiling.Narrow(sd.LimitCeiling)
	for _, p := range sd.Problems {
		d.Problems = append(d.Problems, "the sandbox service: "+p)
	}
	if !sd.Ready && len(sd.Problems) == 0 {
		d.Problems = append(d.Problems, "the sandbox service says it is not ready")
	}
	if !sd.Isolation.AtLeast(s.opts.Isolation) {
		d.Problems = append(d.Problems, fmt.Sprintf("the sandbox service reaches isolation %q, and this profile requires %q", sd.Isolation, s.opts.Isolation))
	}
	d.Ready = len(d.Problems) == 0
	return d
}

// describe returns the cached answer, or asks the service again.
func (s *Sandbox) describe(ctx context.Context) (*DescribeAnswer, error) {
	s.mu.Lock()
	if s.desc != nil && time.Since(s.descAt) < s.opts.DescribeTTL {
		a := s.desc
		s.mu.Unlock()
		return a, nil
	}
	s.mu.Unlock()
	var err error
	for attempt := 0; attempt < s.opts.DescribeAttempts; attempt++ {
		if attempt > 0 {
			select {
			case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		var a *DescribeAnswer
		var retry bool
		a, retry, err = s.fetchDescribe(ctx)
		if err == nil {
			s.mu.Lock()
			s.desc, s.descAt = a, time.Now()
			s.mu.Unlock()
			return a, nil
		}
		if !retry {
			break
		}
	}
	return nil, err
}

func (s *Sandbox) fetchDescribe(ctx context.Context) (a *DescribeAnswer, retry bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := s.request(ctx, http.MethodGet, PathDescribe, nil)
	if err != nil {
		return nil, false, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, ctx.Err() == nil, errors.New(transportError(err))
	}
	defer drainBody(resp)
	if resp.StatusCode != http.StatusOK {
		retry := resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests
		return nil, retry, errors.New(answerError(resp))
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxDescribeBytes+1))
	if err != nil {
		return nil, true, errors.New(transportError(err))
	}
	if len(b) > maxDescribeBytes {
		return nil, false, fmt.Errorf("the describe answer is larger than %d bytes", maxDescribeBytes)
	}
	a = &DescribeAnswer{}
	if err := wire.Unmarshal(b, a); err != nil {
		return nil, false, fmt.Errorf("the describe answer is malformed: %v", err)
	}
	if a.Protocol != Version {
		return nil, false, fmt.Errorf("the service speaks protocol %d, this client %d", a.Protocol, Version)
	}
	if _, err := engine.ParseLevel(string(a.Description.Isolation)); err != nil || a.Description.Isolation == "" {
		return nil, false, errors.New("the describe answer names no known isolation level")
	}
	return a, false, nil
}

// Run runs one program on the service. Every ending is a Result; an execution is never
// retried.
func (s *Sandbox) Run(ctx context.Context, ex engine.Execution) *engine.Outcome {
	start := time.Now()
	t := s.Terms(ex.Terms)
	res := s.run(ctx, ex, t)
	res.DurationSeconds = time.Since(start).Seconds()
	return res
}

func (s *Sandbox) run(ctx context.Context, ex engine.Execution, t engine.Terms) *engine.Outcome {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	switch {
	case closed:
		return engine.Refuse(t, failure.BackendUnavailable, "the remote sandbox was closed; nothing ran")
	case t.Network == engine.NetworkUnrestricted && !s.opts.AllowNetwork:
		return engine.Refuse(t, failure.NetworkUnavailable, engine.NetworkRefusal(t.Network, false, true))
	case ctx.Err() != nil:
		res := engine.Refuse(t, failure.Cancelled, "the request was cancelled before the program started")
		res.Cancelled = true
		return res
	}
	a, err := s.describe(ctx)
	if err != nil {
		return engine.Refuse(t, failure.BackendUnavailable, "the sandbox service could not be described, so nothing was sent: "+err.Error())
	}
	// The first of the four narrowing steps: what the backend can provide.
	t.Limits = a.Description.LimitCeiling.Narrow(t.Limits)
	if err := t.Limits.Validate(); err != nil {
		return engine.Refuse(t, failure.BackendUnavailable, "the terms are invalid: "+err.Error())
	}
	switch d := a.Description; {
	case !d.Ready:
		return engine.Refuse(t, failure.BackendUnavailable, "the sandbox service says it is not ready ("+strings.Join(d.Problems, "; ")+"); nothing was sent")
	case !d.Isolation.AtLeast(t.Isolation):
		return engine.Refuse(t, failure.IsolationUnavailable, fmt.Sprintf(
			"isolation %q was required, but the sandbox service reaches only %q; nothing was sent", t.Isolation, d.Isolation))
	case t.Network == engine.NetworkUnrestricted && !a.AllowNetwork:
		return engine.Refuse(t, failure.NetworkUnavailable, "network access was granted, but the sandbox service does not allow network; nothing was sent")
	}
	log := s.log
	if ex.Logger != nil { // the execution's own: its lines name the execution, tenant, agent and Run
		log = ex.Logger.With("backend", "remote")
	}
	x := &execution{s: s, ex: ex, t: t, start: time.Now(), log: log}
	x.calls = engine.NewCalls(ex.Tools, s.opts.MaxConcurrentCalls, x.reply)
	return x.drive(ctx)
}
