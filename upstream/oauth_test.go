package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// fakeTokens is a TokenSource handing out tok-1, tok-2, … : Renew always gives a new one
// unless the refused token is no longer the current one.
type fakeTokens struct {
	mu      sync.Mutex
	n       int
	renewed int
}

func (f *fakeTokens) current() string { return fmt.Sprintf("oauth-secret-tok-%d", f.n) }

func (f *fakeTokens) Token(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		f.n = 1
	}
	return f.current(), nil
}

func (f *fakeTokens) Renew(_ context.Context, refused string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if refused == f.current() {
		f.n++
		f.renewed++
	}
	return f.current(), nil
}

// oauthUpstream serves a go-sdk server on loopback that admits the bearer tokens accept says
// yes to and answers 401 otherwise, counting the refusals.
func oauthUpstream(t *testing.T, accept func(tok string) bool) (url string, refused *atomic.Int32) {
	h := echoToolHandler(&mcp.StreamableHTTPOptions{Stateless: true})
	refused = &atomic.Int32{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !accept(tok) {
			refused.Add(1)
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL, refused
}

// TestOAuthRetriesOnceOn401: a request the upstream refuses with 401 is sent once more with a
// renewed token and succeeds; when the renewed token is refused too, the call fails with a
// reason that names the 401 after a renewal, after exactly one renewal, and no token is in
// the log or the model's message.
func TestOAuthRetriesOnceOn401(t *testing.T) {
	var mu sync.Mutex
	valid := map[string]bool{"oauth-secret-tok-1": true}
	accept := func(tok string) bool { mu.Lock(); defer mu.Unlock(); return valid[tok] }
	url, refused := oauthUpstream(t, accept)
	src := &fakeTokens{}
	turn, logs := webTurn(t, Server{Name: "web", URL: url, OAuth: src})
	wantOK(t, callCtx(context.Background(), turn, "web__echo", json.RawMessage(`{"s":"one"}`)))
	if src.renewed != 0 || refused.Load() != 0 {
		t.Fatalf("%d renewals and %d refusals with a valid token", src.renewed, refused.Load())
	}

	// The token is revoked; the next one is good: one 401, one renewal, the call succeeds.
	mu.Lock()
	valid = map[string]bool{"oauth-secret-tok-2": true}
	mu.Unlock()
	if got := wantOK(t, callCtx(context.Background(), turn, "web__echo", json.RawMessage(`{"s":"two"}`))); got != `"two"` {
		t.Errorf("echo = %s", got)
	}
	if src.renewed != 1 || refused.Load() != 1 {
		t.Fatalf("%d renewals and %d refusals, want 1 and 1", src.renewed, refused.Load())
	}

	// Nothing is accepted any more: one retry, then a failure that says so.
	mu.Lock()
	valid = map[string]bool{}
	mu.Unlock()
	r := callCtx(context.Background(), turn, "web__echo", json.RawMessage(`{"s":"three"}`))
	wantKind(t, r, failure.UpstreamError)
	if src.renewed != 2 || refused.Load() != 3 {
		t.Errorf("%d renewals and %d refusals, want 2 and 3 (one retry, not a loop)", src.renewed, refused.Load())
	}
	if !strings.Contains(r.Message, "401 after a renewal") {
		t.Errorf("the model is told %q, want it to name the 401 after a renewal", r.Message)
	}
	if strings.Contains(logs.String()+r.Message, "oauth-secret-tok") {
		t.Errorf("a token reached the log or the message:\n%s\n%s", r.Message, logs)
	}
}

// TestOAuthListingRefusedAfterRenewal: a server that refuses every token is listed as a
// problem naming the 401 after a renewal, not as "connecting to it failed".
func TestOAuthListingRefusedAfterRenewal(t *testing.T) {
	url, _ := oauthUpstream(t, func(string) bool { return false })
	p, err := NewPool(&PoolOptions{
		Servers: []Server{{Name: "web", URL: url, OAuth: &fakeTokens{}}},
		Logger:  slog.New(slog.NewTextHandler(&testkit.Log{}, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got := p.Catalogue(context.Background()).Resolve([]string{"web"}, nil, nil, nil).Problems()["web"]
	if !strings.Contains(got, "its credential is not available: it refused a freshly fetched OAuth access token (HTTP 401 after a renewal)") {
		t.Errorf("problem = %q", got)
	}
}

// TestOAuthTokenGoesToTheEndpointOnly: the token is sent to the upstream's own scheme and
// host and to nothing else, and an OAuth upstream is validated like a bearer one.
func TestOAuthTokenGoesToTheEndpointOnly(t *testing.T) {
	var sawOther atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawOther.Store(r.Header.Get("Authorization") != "")
	}))
	defer other.Close()
	s := Server{Name: "web", URL: "http://127.0.0.1:1/mcp", OAuth: &fakeTokens{}}
	resp, err := s.httpClient().Get(other.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if sawOther.Load() {
		t.Error("the token was sent to another host")
	}
	for _, bad := range []Server{
		{Name: "web", URL: "http://upstream.example/mcp", OAuth: &fakeTokens{}},
		{Name: "web", Command: []string{"x"}, OAuth: &fakeTokens{}},
		{Name: "web", URL: "https://upstream.example/mcp", OAuth: &fakeTokens{}, Bearer: func(context.Context) (string, error) { return "", nil }},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v validated", bad)
		}
	}
	if !errors.Is(&CredentialError{Err: ErrRefusedAfterRenewal}, ErrRefusedAfterRenewal) {
		t.Error("ErrRefusedAfterRenewal is not in the chain")
	}
}
