package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// TokenSource supplies an upstream's OAuth access tokens (upstream/oauthclient implements it
// with the client-credentials grant). Its errors name the problem in a *CredentialError and
// never hold a token or a secret. Both methods are called concurrently.
type TokenSource interface {
	// Token returns the access token to send now: a cached one while it is fresh.
	Token(ctx context.Context) (string, error)
	// Renew is called when the upstream answered refused with 401: it returns another token,
	// fetched now unless a concurrent caller has already replaced refused.
	Renew(ctx context.Context, refused string) (string, error)
}

// ErrRefusedAfterRenewal is in the chain of the error of a request the upstream refused with
// 401 twice: with the cached token and with a freshly fetched one.
var ErrRefusedAfterRenewal = errors.New("the upstream refused a freshly fetched OAuth access token (HTTP 401 after a renewal)")

// oauthTransport adds the source's access token to every request bound for the configured
// endpoint's scheme and host, and to no other; a 401 is answered by one retry with a renewed
// token, and a second 401 is an error that names it. No token appears in an error.
type oauthTransport struct {
	source   TokenSource
	base     http.RoundTripper
	endpoint *url.URL
}

func (t *oauthTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !sameOrigin(req.URL, t.endpoint) {
		return t.base.RoundTrip(req)
	}
	tok, err := t.source.Token(req.Context())
	if err != nil {
		return nil, fmt.Errorf("getting an OAuth access token for the upstream: %w", err)
	}
	resp, err := t.send(req, tok)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return resp, nil // the body cannot be sent again; the caller sees the 401
	}
	drain(resp)
	fresh, err := t.source.Renew(req.Context(), tok)
	if err != nil {
		return nil, fmt.Errorf("renewing the OAuth access token the upstream refused: %w", err)
	}
	resp, err = t.send(req, fresh)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	drain(resp)
	return nil, &CredentialError{
		Reason: "it refused a freshly fetched OAuth access token (HTTP 401 after a renewal): the client may lack a scope it requires, or the token may name another audience (oauth.resource)",
		Err:    ErrRefusedAfterRenewal,
	}
}

// send sends a copy of req with tok as its bearer (a fresh body when the request has one).
func (t *oauthTransport) send(req *http.Request, tok string) (*http.Response, error) {
	r := req.Clone(req.Context())
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		r.Body = body
	}
	r.Header.Set("Authorization", "Bearer "+tok)
	return t.base.RoundTrip(r)
}

// drain reads a little of a refused response's body, so its connection can be reused, and
// closes it.
func drain(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
}
