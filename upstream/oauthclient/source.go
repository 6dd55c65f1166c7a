package oauthclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

// Options configure a Source. URL, ClientID and Secret are required.
type Options struct {
	// URL is the upstream's endpoint: where its Protected Resource Metadata is looked for when
	// Issuer is empty, and the default Resource.
	URL string
	// Issuer is the authorization server's issuer identifier; empty means the first one the
	// upstream's Protected Resource Metadata names.
	Issuer string
	// ClientID is the client the authorization server registered for this server.
	ClientID string
	// Secret resolves the client secret; it is called at every exchange. Its error should be
	// an *upstream.CredentialError saying where the secret is looked up.
	Secret func(ctx context.Context) (string, error)
	// Scopes are asked for; none means the authorization server's default.
	Scopes []string
	// Resource is the resource indicator sent (RFC 8707); empty means the resource the
	// upstream's metadata names when it was read, else URL.
	Resource string
	// HTTPClient reaches the authorization server (and the upstream's metadata); nil means a
	// client with a 30 s timeout.
	HTTPClient *http.Client
	// Now is the clock the cache is kept by (default time.Now).
	Now func() time.Time
}

// Source is an upstream.TokenSource that gets tokens by the client-credentials grant.
type Source struct {
	o Options

	// lock is held (a token in the channel) across an exchange, so that concurrent callers
	// share one; a channel, so that waiting honours the caller's context.
	lock chan struct{}
	// Guarded by lock.
	token     string
	refreshAt time.Time // zero: no expiry was given; kept until the upstream refuses it
	tokenURL  string    // from the metadata, kept after a successful exchange
	resource  string
	style     oauth2.AuthStyle

	exchanges atomic.Int64
}

var _ upstream.TokenSource = (*Source)(nil)

// New returns a Source; it contacts nothing until the first token is needed.
func New(o *Options) *Source {
	s := &Source{o: *o, lock: make(chan struct{}, 1)}
	if s.o.HTTPClient == nil {
		s.o.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if s.o.Now == nil {
		s.o.Now = time.Now
	}
	return s
}

// Exchanges is how many token requests were sent, answered or not.
func (s *Source) Exchanges() int64 { return s.exchanges.Load() }

// Token returns the cached token while it is fresh, and otherwise fetches one.
func (s *Source) Token(ctx context.Context) (string, error) {
	if err := s.acquire(ctx); err != nil {
		return "", err
	}
	defer s.release()
	if s.fresh() {
		return s.token, nil
	}
	return s.fetch(ctx)
}

// Renew returns a token other than refused: the cached one when a concurrent caller has
// already replaced refused, and otherwise a freshly fetched one.
func (s *Source) Renew(ctx context.Context, refused string) (string, error) {
	if err := s.acquire(ctx); err != nil {
		return "", err
	}
	defer s.release()
	if s.token != refused && s.fresh() {
		return s.token, nil
	}
	s.token = ""
	return s.fetch(ctx)
}

func (s *Source) acquire(ctx context.Context) error {
	select {
	case s.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Source) release() { <-s.lock }

func (s *Source) fresh() bool {
	return s.token != "" && (s.refreshAt.IsZero() || s.o.Now().Before(s.refreshAt))
}

// Margin is how long before its expiry a token of the given lifetime is replaced: a tenth of
// it, between one second and thirty, so that a token is never sent in its last moments and a
// short-lived one is still used for most of its life.
func Margin(lifetime time.Duration) time.Duration {
	return min(max(lifetime/10, time.Second), 30*time.Second)
}

// fetch runs one exchange; the caller holds lock.
func (s *Source) fetch(ctx context.Context) (string, error) {
	if s.tokenURL == "" {
		if err := s.discover(ctx); err != nil {
			return "", err
		}
	}
	secret, err := s.o.Secret(ctx)
	if err != nil {
		return "", err
	}
	cfg := clientcredentials.Config{
		ClientID:       s.o.ClientID,
		ClientSecret:   secret,
		TokenURL:       s.tokenURL,
		Scopes:         s.o.Scopes,
		EndpointParams: url.Values{"resource": {s.resource}},
		AuthStyle:      s.style,
	}
	s.exchanges.Add(1)
	asked := s.o.Now()
	tok, err := cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, s.o.HTTPClient))
	if err != nil {
		s.tokenURL = "" // discover again: the server may have moved its endpoint
		return "", s.exchangeError(err, secret)
	}
	if !strings.EqualFold(tok.Type(), "Bearer") {
		return "", &upstream.CredentialError{
			Reason: fmt.Sprintf("its OAuth authorization server issued a token of type %q, and only Bearer tokens are sent", printable(tok.Type())),
			Err:    fmt.Errorf("oauth: the token endpoint %s issued a %q token, not a Bearer token", s.tokenURL, printable(tok.Type()))}
	}
	s.token, s.refreshAt = tok.AccessToken, time.Time{}
	if !tok.Expiry.IsZero() {
		// x/oauth2 turned expires_in into a time by the wall clock as the answer arrived;
		// the lifetime is kept by ours, counted from when the request was sent.
		life := time.Until(tok.Expiry)
		s.refreshAt = asked.Add(life - Margin(life))
	}
	return s.token, nil
}

// discover finds the token endpoint: by the configured issuer's metadata, or by the
// upstream's Protected Resource Metadata and then its first authorization server's. The
// caller holds lock.
func (s *Source) discover(ctx context.Context) error {
	issuer, resource := s.o.Issuer, s.o.Resource
	client := s.o.HTTPClient
	if issuer == "" {
		prm, err := s.resourceMetadata(ctx)
		if err != nil {
			return err
		}
		issuer = prm.AuthorizationServers[0]
		if resource == "" {
			resource = prm.Resource
		}
		// The issuer came from the upstream, not from the operator: keep the go-sdk's guard
		// against metadata that leads to private addresses.
		client = &http.Client{Timeout: s.o.HTTPClient.Timeout}
	} else {
		// The operator named the issuer, so it may be on a private network, which the
		// go-sdk's discovery refuses unless the client brings its own transport.
		base := client.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		client = &http.Client{Timeout: client.Timeout, Transport: plainTransport{base}}
	}
	if resource == "" {
		resource = s.o.URL
	}
	meta, err := auth.GetAuthServerMetadata(ctx, issuer, client)
	switch {
	case err != nil:
		return &upstream.CredentialError{Reason: "its OAuth authorization server " + reachability(err) + " when its metadata (RFC 8414) was read",
			Err: fmt.Errorf("oauth: reading the metadata of issuer %s (RFC 8414, OpenID discovery): %w", issuer, err)}
	case meta == nil || meta.TokenEndpoint == "":
		return &upstream.CredentialError{Reason: "its OAuth authorization server publishes no token endpoint in RFC 8414 or OpenID metadata",
			Err: fmt.Errorf("oauth: issuer %s: no metadata names a token_endpoint", issuer)}
	}
	if e, err := url.Parse(meta.TokenEndpoint); err != nil || (e.Scheme != "https" && !(e.Scheme == "http" && loopback(e.Hostname()))) {
		return &upstream.CredentialError{Reason: "its OAuth authorization server's token endpoint is not an https URL, so the client secret is not sent to it",
			Err: fmt.Errorf("oauth: issuer %s: token_endpoint %q is not https (or http on loopback)", issuer, meta.TokenEndpoint)}
	}
	s.tokenURL, s.resource = meta.TokenEndpoint, resource
	s.style = oauth2.AuthStyleAutoDetect
	switch methods := meta.TokenEndpointAuthMethodsSupported; {
	case len(methods) == 0 || slices.Contains(methods, "client_secret_basic"):
		s.style = oauth2.AuthStyleInHeader // RFC 8414's default when the list is absent
	case slices.Contains(methods, "client_secret_post"):
		s.style = oauth2.AuthStyleInParams
	}
	return nil
}

// resourceMetadata reads the upstream's Protected Resource Metadata: at the well-known URL
// with the endpoint's path inserted, then at the root (RFC 9728 §3.1).
func (s *Source) resourceMetadata(ctx context.Context) (*oauthex.ProtectedResourceMetadata, error) {
	u, err := url.Parse(s.o.URL)
	if err != nil {
		return nil, err
	}
	pathForm, rootForm := *u, *u
	pathForm.Path = "/.well-known/oauth-protected-resource/" + strings.TrimLeft(u.Path, "/")
	pathForm.RawPath, pathForm.RawQuery = "", ""
	rootForm.Path, rootForm.RawPath, rootForm.RawQuery = "/.well-known/oauth-protected-resource", "", ""
	origin := *u
	origin.Path, origin.RawPath, origin.RawQuery = "", "", ""
	var errs []error
	for _, try := range []struct{ url, resource string }{{pathForm.String(), s.o.URL}, {rootForm.String(), origin.String()}} {
		prm, err := oauthex.GetProtectedResourceMetadata(ctx, try.url, try.resource, &http.Client{Timeout: s.o.HTTPClient.Timeout})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prm != nil && len(prm.AuthorizationServers) > 0 {
			return prm, nil
		}
	}
	return nil, &upstream.CredentialError{
		Reason: "no OAuth issuer is configured (oauth.issuer) and the upstream's Protected Resource Metadata names no authorization server (" + reachability(errors.Join(errs...)) + ")",
		Err:    fmt.Errorf("oauth: discovering the authorization server of %s (RFC 9728): %w", s.o.URL, errors.Join(errs...))}
}

// exchangeError names what went wrong with a token request: the endpoint unreachable, or
// what the authorization server answered (invalid_client above all). The secret is scrubbed
// from the operator's error in case a server echoed it.
func (s *Source) exchangeError(err error, secret string) error {
	scrub := func(e error) error {
		msg := e.Error()
		if len(msg) > 600 {
			msg = msg[:600] + "…"
		}
		if secret != "" {
			msg = strings.ReplaceAll(msg, secret, "[client secret]")
		}
		return fmt.Errorf("oauth: the client-credentials request to %s for client %q: %s", s.tokenURL, s.o.ClientID, msg)
	}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		var reason string
		switch code := printable(re.ErrorCode); code {
		case "invalid_client":
			reason = "its OAuth authorization server refused the client (invalid_client): the client_id or client_secret is wrong, or the client may not use the client-credentials grant"
		case "unauthorized_client":
			reason = "its OAuth authorization server does not allow this client the client-credentials grant (unauthorized_client)"
		case "invalid_scope":
			reason = "its OAuth authorization server refused the requested scopes (invalid_scope)"
		case "invalid_target":
			reason = "its OAuth authorization server refused the resource the token was asked for (invalid_target): check oauth.resource"
		case "":
			status := 0
			if re.Response != nil {
				status = re.Response.StatusCode
			}
			reason = fmt.Sprintf("its OAuth authorization server answered the token request with HTTP %d and no OAuth error", status)
		default:
			reason = "its OAuth authorization server refused the token request (" + code + ")"
		}
		return &upstream.CredentialError{Reason: reason, Err: scrub(err)}
	}
	return &upstream.CredentialError{Reason: "its OAuth authorization server's token endpoint " + reachability(err), Err: scrub(err)}
}

// reachability says in a few words why a request to an authorization server failed.
func reachability(err error) string {
	var op *net.OpError
	var dns *net.DNSError
	switch {
	case err == nil:
		return "no answer"
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return "did not answer in time"
	case errors.As(err, &op) || errors.As(err, &dns):
		return "could not be reached"
	}
	// The go-sdk's discovery keeps the words of a network error but not its type.
	for _, words := range []string{"connection refused", "no such host", "i/o timeout", "network is unreachable", "connection reset"} {
		if strings.Contains(err.Error(), words) {
			return "could not be reached"
		}
	}
	return "did not answer as OAuth requires"
}

// printable keeps what an authorization server said to at most 64 printable ASCII bytes:
// it reaches the model.
func printable(s string) string {
	b := []byte(s)
	out := b[:0]
	for _, c := range b {
		if c >= 0x21 && c <= 0x7e && c != '"' && c != '\\' {
			out = append(out, c)
		}
		if len(out) == 64 {
			break
		}
	}
	return string(out)
}

func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// plainTransport wraps a transport so that the go-sdk's discovery uses it as given (it adds
// its private-address guard only to a bare *http.Transport).
type plainTransport struct{ http.RoundTripper }
