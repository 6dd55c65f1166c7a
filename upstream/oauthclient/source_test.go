package oauthclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

const (
	testClient = "upstream-caller"
	testSecret = "client-secret-0f9e8d"
)

// authServer is an RFC 8414 authorization server on loopback that issues tok-1, tok-2, … to
// testClient by the client-credentials grant (client_secret_basic), expiring in ttl seconds.
type authServer struct {
	srv    *httptest.Server
	ttl    int
	issued atomic.Int32

	mu   sync.Mutex
	last map[string]string // the last request's form: scope, resource
}

func newAuthServer(t *testing.T, ttl int) *authServer {
	a := &authServer{ttl: ttl}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"issuer": a.srv.URL, "token_endpoint": a.srv.URL + "/token",
			"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
			"code_challenge_methods_supported":      []string{"S256"}, // the go-sdk's discovery insists
		})
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		id, secret, ok := r.BasicAuth()
		w.Header().Set("Content-Type", "application/json")
		if !ok || id != testClient || secret != testSecret || r.FormValue("grant_type") != "client_credentials" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"invalid_client","error_description":"client authentication failed"}`)
			return
		}
		a.mu.Lock()
		a.last = map[string]string{"scope": r.FormValue("scope"), "resource": r.FormValue("resource")}
		a.mu.Unlock()
		n := a.issued.Add(1)
		fmt.Fprintf(w, `{"access_token":"issued-token-%d","token_type":"Bearer","expires_in":%d}`, n, a.ttl)
	})
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	return a
}

func (a *authServer) asked(key string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last[key]
}

func secretIs(s string) func(context.Context) (string, error) {
	return func(context.Context) (string, error) { return s, nil }
}

// clock is a test clock moved by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }
func newClock() *clock               { return &clock{t: time.Now()} }
func token(t *testing.T, s *Source) string {
	t.Helper()
	tok, err := s.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestTokenCachedUntilShortlyBeforeExpiry: one exchange serves every caller while the token
// is fresh (concurrent callers share it); it is replaced once less than its margin is left;
// the scopes and the resource are asked for.
func TestTokenCachedUntilShortlyBeforeExpiry(t *testing.T) {
	as := newAuthServer(t, 100)
	clk := newClock()
	s := New(&Options{URL: "http://127.0.0.1:9/mcp", Issuer: as.srv.URL, ClientID: testClient, Secret: secretIs(testSecret),
		Scopes: []string{"crm.read", "crm.write"}, Resource: "https://crm.example/mcp", Now: clk.now})
	var wg sync.WaitGroup
	toks := make([]string, 8)
	for i := range toks {
		wg.Go(func() { toks[i] = token(t, s) })
	}
	wg.Wait()
	for _, tok := range toks {
		if tok != "issued-token-1" {
			t.Fatalf("tokens %v, want all issued-token-1", toks)
		}
	}
	if n := as.issued.Load(); n != 1 {
		t.Fatalf("%d exchanges for 8 concurrent callers, want 1", n)
	}
	if as.asked("scope") != "crm.read crm.write" || as.asked("resource") != "https://crm.example/mcp" {
		t.Errorf("asked for scope %q and resource %q", as.asked("scope"), as.asked("resource"))
	}
	margin := Margin(100 * time.Second)
	clk.add(100*time.Second - margin - time.Second)
	if tok := token(t, s); tok != "issued-token-1" || as.issued.Load() != 1 {
		t.Errorf("with %s left the token was replaced (%s)", margin+time.Second, tok)
	}
	clk.add(2 * time.Second)
	if tok := token(t, s); tok != "issued-token-2" || as.issued.Load() != 2 {
		t.Errorf("with less than %s left the token was kept (%s, %d exchanges)", margin, tok, as.issued.Load())
	}
	if s.Exchanges() != 2 {
		t.Errorf("Exchanges() = %d", s.Exchanges())
	}
}

// TestRenewFetchesOnceForARefusedToken: Renew of the current token fetches a new one; Renew of
// a token already replaced returns the replacement without an exchange.
func TestRenewFetchesOnceForARefusedToken(t *testing.T) {
	as := newAuthServer(t, 3600)
	s := New(&Options{URL: "http://127.0.0.1:9/mcp", Issuer: as.srv.URL, ClientID: testClient, Secret: secretIs(testSecret)})
	first := token(t, s)
	second, err := s.Renew(context.Background(), first)
	if err != nil || second == first {
		t.Fatalf("Renew(%s) = %s, %v", first, second, err)
	}
	again, err := s.Renew(context.Background(), first)
	if err != nil || again != second || as.issued.Load() != 2 {
		t.Errorf("a second Renew of the refused token gave %s (%v) after %d exchanges, want %s after 2", again, err, as.issued.Load(), second)
	}
	if as.asked("resource") != "http://127.0.0.1:9/mcp" {
		t.Errorf("the resource asked for is %q, want the upstream's URL", as.asked("resource"))
	}
}

// TestExchangeFailuresNameTheProblem: a wrong secret is invalid_client, a closed port is an
// unreachable authorization server, an unresolvable secret says where it is looked up; no
// error holds the secret.
func TestExchangeFailuresNameTheProblem(t *testing.T) {
	as := newAuthServer(t, 60)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	notSet := &upstream.CredentialError{Reason: "the environment variable CRM_SECRET is not set", Err: errors.New("credential env:CRM_SECRET: not set")}
	for _, tt := range []struct {
		name   string
		issuer string
		secret func(context.Context) (string, error)
		want   string
	}{
		{"wrong secret", as.srv.URL, secretIs("wrong-secret-77aa"), "refused the client (invalid_client)"},
		{"unreachable", closed, secretIs(testSecret), "its OAuth authorization server could not be reached"},
		{"secret unset", as.srv.URL, func(context.Context) (string, error) { return "", notSet }, "CRM_SECRET is not set"},
	} {
		s := New(&Options{URL: "http://127.0.0.1:9/mcp", Issuer: tt.issuer, ClientID: testClient, Secret: tt.secret})
		_, err := s.Token(context.Background())
		var ce *upstream.CredentialError
		if !errors.As(err, &ce) || !strings.Contains(ce.Reason, tt.want) {
			t.Errorf("%s: %v, want a CredentialError saying %q", tt.name, err, tt.want)
			continue
		}
		if strings.Contains(err.Error(), "wrong-secret-77aa") || strings.Contains(ce.Reason, "wrong-secret-77aa") || strings.Contains(err.Error(), testSecret) {
			t.Errorf("%s: the secret is in the error: %v", tt.name, err)
		}
	}
	// The token endpoint itself unreachable (the metadata names a closed port).
	meta := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/oauth-authorization-server" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"issuer":%q,"token_endpoint":%q,"code_challenge_methods_supported":["S256"]}`, "http://"+r.Host, closed+"/token")
	}))
	defer meta.Close()
	s := New(&Options{URL: "http://127.0.0.1:9/mcp", Issuer: meta.URL, ClientID: testClient, Secret: secretIs(testSecret)})
	_, err = s.Token(context.Background())
	var ce *upstream.CredentialError
	if !errors.As(err, &ce) || ce.Reason != "its OAuth authorization server's token endpoint could not be reached" {
		t.Errorf("unreachable token endpoint: %v", err)
	}
}

// TestIssuerDiscoveredFromResourceMetadata: without an issuer, the authorization server is the
// one the upstream's Protected Resource Metadata names (RFC 9728, path form), and the
// resource asked for is the one it names.
func TestIssuerDiscoveredFromResourceMetadata(t *testing.T) {
	as := newAuthServer(t, 60)
	var up *httptest.Server
	up = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/oauth-protected-resource/mcp" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"resource":%q,"authorization_servers":[%q]}`, up.URL+"/mcp", as.srv.URL)
	}))
	defer up.Close()
	s := New(&Options{URL: up.URL + "/mcp", ClientID: testClient, Secret: secretIs(testSecret)})
	if tok := token(t, s); tok != "issued-token-1" {
		t.Fatalf("token %s", tok)
	}
	if as.asked("resource") != up.URL+"/mcp" {
		t.Errorf("resource %q", as.asked("resource"))
	}
	bare := New(&Options{URL: as.srv.URL + "/nothing", ClientID: testClient, Secret: secretIs(testSecret)})
	_, err := bare.Token(context.Background())
	var ce *upstream.CredentialError
	if !errors.As(err, &ce) || !strings.Contains(ce.Reason, "no OAuth issuer is configured") {
		t.Errorf("no metadata: %v", err)
	}
}
