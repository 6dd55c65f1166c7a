package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults used when a Server leaves a field zero.
const (
	DefaultCallTimeout    = 60 * time.Second
	DefaultConnectTimeout = 30 * time.Second
	// DefaultFirstStartTimeout bounds a stdio server's first start in a Pool, which may
	// download its package before it answers (npx -y, uvx): minutes on a slow link.
	DefaultFirstStartTimeout = 5 * time.Minute
	DefaultMaxFrameBytes     = 8 << 20
	// closeGrace is how long Close waits for a stdio server to exit after its stdin closes,
	// and again after the kill, before giving up on it.
	closeGrace = 2 * time.Second
)

// Server describes one upstream: an MCP server (a command speaking stdio, or a streamable-HTTP
// URL) or an A2A peer (a URL with A2A set). Exactly one of Command and URL is set.
type Server struct {
	// Name is the server's name, the prefix of its tools' model-facing names.
	Name string
	// Command is the program and its arguments (stdio).
	Command []string
	// Env is the server's environment besides PATH and HOME, which are inherited.
	Env map[string]string
	// Dir is the working directory of Command; empty means ours.
	Dir string
	// Launch, when set, starts Command contained (a sandbox backend's, which cmd wires from
	// the upstream's sandbox profile) instead of as a process of the host's own.
	Launch Launcher
	// URL is a streamable-HTTP endpoint, or with A2A the peer's base URL: its Agent Card is
	// read from .well-known/agent-card.json below it (or from URL itself when it names the
	// card).
	URL string
	// A2A makes the server an A2A peer: its skills are its tools (a2a.go).
	A2A bool
	// Bearer, when set, returns the credential for one HTTP request. It is called for every
	// request, and its result is never logged or put in an error.
	Bearer func(ctx context.Context) (string, error)
	// OAuth, when set, supplies OAuth access tokens for the endpoint instead of Bearer: a
	// request refused with 401 is sent once more with a renewed token (oauth.go).
	OAuth TokenSource
	// AllowInsecureHTTP permits a Bearer or OAuth token over plaintext http:// to a
	// non-loopback host.
	AllowInsecureHTTP bool
	// Deferred keeps the server's tools out of Exposed; they stay bindable and searchable.
	Deferred bool
	// CallTimeout bounds one tools/call; zero means DefaultCallTimeout.
	CallTimeout time.Duration
	// ConnectTimeout bounds starting and initializing a session; zero means DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// FirstStartTimeout bounds a stdio server's starts in a Pool until one has completed
	// initialize (the first may download the server: npx -y); zero means
	// DefaultFirstStartTimeout, and it is never shorter than the connect timeout. A start
	// that times out is killed with its whole process tree.
	FirstStartTimeout time.Duration
	// MaxFrameBytes bounds one inbound stdio JSON-RPC frame; zero means DefaultMaxFrameBytes.
	MaxFrameBytes int
	// ProtocolVersion pins the protocol version offered at initialize, for peers that need it;
	// empty means the go-sdk's latest.
	ProtocolVersion string
}

// Validate reports a problem with s, naming the offending field.
func (s Server) Validate() error {
	if err := validServerName(s.Name); err != nil {
		return err
	}
	switch {
	case len(s.Command) > 0 && s.URL != "":
		return fmt.Errorf("upstream %q: command and url are exclusive", s.Name)
	case len(s.Command) == 0 && s.URL == "":
		return fmt.Errorf("upstream %q: one of command or url is required", s.Name)
	case len(s.Command) > 0 && s.Command[0] == "":
		return fmt.Errorf("upstream %q: command is empty", s.Name)
	case len(s.Command) > 0 && (s.Bearer != nil || s.OAuth != nil):
		return fmt.Errorf("upstream %q: bearer and oauth apply to a url only", s.Name)
	case s.Bearer != nil && s.OAuth != nil:
		return fmt.Errorf("upstream %q: bearer and oauth are exclusive", s.Name)
	case len(s.Command) > 0 && s.A2A:
		return fmt.Errorf("upstream %q: an A2A peer is reached by url, not command", s.Name)
	}
	if s.URL != "" {
		u, err := url.Parse(s.URL)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return fmt.Errorf("upstream %q: url must be an absolute http or https URL", s.Name)
		}
		if u.User != nil {
			return fmt.Errorf("upstream %q: url must not carry credentials; use bearer", s.Name)
		}
		if u.Scheme == "http" && (s.Bearer != nil || s.OAuth != nil) && !s.AllowInsecureHTTP && !isLoopback(u.Hostname()) {
			return fmt.Errorf("upstream %q: a bearer credential over plaintext http to a non-loopback host is refused (use https, or set allow_insecure_http)", s.Name)
		}
	}
	if s.CallTimeout < 0 || s.ConnectTimeout < 0 || s.FirstStartTimeout < 0 || s.MaxFrameBytes < 0 {
		return fmt.Errorf("upstream %q: timeouts and frame limit must not be negative", s.Name)
	}
	return nil
}

func validServerName(name string) error {
	if name == "" {
		return errors.New("upstream: a server needs a name")
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("upstream %q: a name is lowercase letters, digits, '-' and '_'", name)
		}
	}
	if strings.Contains(name, "__") {
		return fmt.Errorf("upstream %q: a name must not contain \"__\"", name)
	}
	return nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (s Server) callTimeout() time.Duration {
	if s.CallTimeout > 0 {
		return s.CallTimeout
	}
	return DefaultCallTimeout
}

func (s Server) connectTimeout() time.Duration {
	if s.ConnectTimeout > 0 {
		return s.ConnectTimeout
	}
	return DefaultConnectTimeout
}

func (s Server) firstStartTimeout() time.Duration {
	d := s.FirstStartTimeout
	if d <= 0 {
		d = DefaultFirstStartTimeout
	}
	return max(d, s.connectTimeout())
}

func (s Server) maxFrame() int {
	if s.MaxFrameBytes > 0 {
		return s.MaxFrameBytes
	}
	return DefaultMaxFrameBytes
}

// httpClient returns the client for an HTTP upstream. Redirects that leave the endpoint's
// scheme and host are refused, the credential goes only to the endpoint's own scheme and host,
// and a JSON response body is bounded by maxFrame (an event stream is bounded per event by the
// transport's MaxEventSize instead, since one stream carries many messages over its life).
func (s Server) httpClient() *http.Client {
	endpoint, _ := url.Parse(s.URL) // Validate checked it
	var rt http.RoundTripper = &boundedTransport{limit: int64(s.maxFrame()), base: http.DefaultTransport}
	if s.Bearer != nil {
		rt = &bearerTransport{resolve: s.Bearer, base: rt, endpoint: endpoint}
	}
	if s.OAuth != nil {
		rt = &oauthTransport{source: s.OAuth, base: rt, endpoint: endpoint}
	}
	return &http.Client{
		Transport: rt,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if !sameOrigin(req.URL, endpoint) {
				return errCrossOriginRedirect
			}
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			return nil
		},
	}
}

var errCrossOriginRedirect = errors.New("a redirect to another scheme or host is refused")

// CredentialError is what a Bearer resolver returns when the credential cannot be had. Reason
// says why in words safe to show a model ("the environment variable DOCS_TOKEN is not set":
// where the credential is looked up, never its value or a file's path); it is what list_tools
// and upstream_problems say of the server, instead of "connecting to it failed". Err is the
// whole error, for the operator's log.
type CredentialError struct {
	Reason string
	Err    error
}

func (e *CredentialError) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	return e.Reason
}

func (e *CredentialError) Unwrap() error { return e.Err }

// sameOrigin reports whether u has the scheme and host (with port) of endpoint.
func sameOrigin(u, endpoint *url.URL) bool {
	return u != nil && endpoint != nil &&
		strings.EqualFold(u.Scheme, endpoint.Scheme) && strings.EqualFold(u.Host, endpoint.Host)
}

// bearerTransport adds a freshly resolved credential to every request bound for the
// configured endpoint's scheme and host, and to no other. The credential never appears in an
// error it returns.
type bearerTransport struct {
	resolve  func(ctx context.Context) (string, error)
	base     http.RoundTripper
	endpoint *url.URL
}

func (t *bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !sameOrigin(req.URL, t.endpoint) {
		return t.base.RoundTrip(req)
	}
	tok, err := t.resolve(req.Context())
	if err != nil {
		// The resolver's error names where the credential lives, never its value.
		return nil, fmt.Errorf("resolving the upstream credential: %w", err)
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	return t.base.RoundTrip(r)
}

// boundedTransport makes a non-event-stream response body fail once it passes limit bytes,
// so a hostile upstream cannot make the go-sdk buffer an unbounded JSON response.
type boundedTransport struct {
	limit int64
	base  http.RoundTripper
}

func (t *boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	if strings.HasPrefix(strings.ToLower(resp.Header.Get("Content-Type")), "text/event-stream") {
		return resp, nil
	}
	if resp.ContentLength > t.limit {
		resp.Body.Close()
		return nil, fmt.Errorf("%w: %d bytes announced, limit %d", errResponseTooLarge, resp.ContentLength, t.limit)
	}
	resp.Body = &limitedBody{rc: resp.Body, left: t.limit}
	return resp, nil
}

var errResponseTooLarge = errors.New("upstream response body exceeds the frame limit")

type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errResponseTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, errResponseTooLarge
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
