package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// testIssuer is an authorization server on loopback for the tests: RFC 8414 metadata, a JWKS
// with one key, and tokens minted with that key.
type testIssuer struct {
	srv *httptest.Server
	key *ecdsa.PrivateKey
	kid string
	// opaque are the introspection answers by opaque token, for client rs:rs-secret.
	mu             sync.Mutex
	opaque         map[string]map[string]any
	introspections int
}

func newTestIssuer(t *testing.T, kid string) *testIssuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is := &testIssuer{key: key, kid: kid, opaque: map[string]map[string]any{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, _ *http.Request) {
		u := is.srv.URL
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"issuer": u, "authorization_endpoint": u + "/authorize", "token_endpoint": u + "/token",
			"jwks_uri": u + "/jwks", "response_types_supported": []string{"code"},
			"code_challenge_methods_supported": []string{"S256"}, "introspection_endpoint": u + "/introspect",
		})
	})
	mux.HandleFunc("POST /introspect", func(w http.ResponseWriter, r *http.Request) {
		if id, secret, ok := r.BasicAuth(); !ok || id != "rs" || secret != "rs-secret" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		is.mu.Lock()
		answer, ok := is.opaque[r.PostFormValue("token")]
		is.introspections++
		is.mu.Unlock()
		if !ok {
			answer = map[string]any{"active": false}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(answer)
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
			{Key: &key.PublicKey, KeyID: kid, Algorithm: string(jose.ES256), Use: "sig"},
		}})
	})
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	return is
}

// mint signs claims with the issuer's key under kid (its own unless given).
func (is *testIssuer) mint(t *testing.T, claims map[string]any, kid string) string {
	t.Helper()
	if kid == "" {
		kid = is.kid
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: is.key},
		(&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

const oauthResource = "https://mcp.example.test/mcp"

const oauthConfig = `
data_dir: "-"
profiles:
  default: {backend: local, isolation: process}
auth:
  oauth:
    resource: %q
    issuers: [{issuer: %q}]
    tenant_claim: sub
tenants:
  acme:
    oauth: {subjects: ["org-acme"], scopes: ["mcp:run"]}
    agents:
      default: {code_execution: {}}
  static:
    tokens: ["%s"]
    agents:
      default: {code_execution: {}}
`

// lines collects a server's log lines for the tests to wait on.
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) add(_ *exec.Cmd, s string) { l.mu.Lock(); l.all = append(l.all, s); l.mu.Unlock() }

func (l *lines) text() string { l.mu.Lock(); defer l.mu.Unlock(); return strings.Join(l.all, "\n") }

// waitFor waits until a line contains want, and returns that line.
func (l *lines) waitFor(t *testing.T, want string) string {
	t.Helper()
	deadline := time.Now().Add(gate.Scaled(10 * time.Second))
	for time.Now().Before(deadline) {
		l.mu.Lock()
		for _, s := range l.all {
			if strings.Contains(s, want) {
				l.mu.Unlock()
				return s
			}
		}
		l.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no log line says %q; the log:\n%s", want, l.text())
	return ""
}

// waitAfter waits until a line at index from or later contains want, so that a refusal's
// reason is the one its own request logged, not an earlier request's.
func (l *lines) waitAfter(t *testing.T, from int, want string) {
	t.Helper()
	deadline := time.Now().Add(gate.Scaled(10 * time.Second))
	for time.Now().Before(deadline) {
		l.mu.Lock()
		for _, s := range l.all[min(from, len(l.all)):] {
			if strings.Contains(s, want) {
				l.mu.Unlock()
				return
			}
		}
		l.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no log line after the request says %q; the log:\n%s", want, l.text())
}

func (l *lines) count() int { l.mu.Lock(); defer l.mu.Unlock(); return len(l.all) }

// TestOAuthRefusals drives each refusal of an access token through serve over HTTP: the
// status, the challenge, and a log line that names the failed check without the token.
func TestOAuthRefusals(t *testing.T) {
	trusted := newTestIssuer(t, "k1")
	untrusted := newTestIssuer(t, "k1")
	cfg := testkit.WriteConfig(t, fmt.Sprintf(oauthConfig, oauthResource, trusted.srv.URL, configs.HashToken("static-token")))
	var log lines
	base, _ := startHTTPWatching(t, cfg, nil, log.add)
	const prmURL = "https://mcp.example.test/.well-known/oauth-protected-resource/mcp"

	now := time.Now()
	claims := func(edit func(map[string]any)) map[string]any {
		c := map[string]any{
			"iss": trusted.srv.URL, "sub": "org-acme", "aud": oauthResource, "scope": "mcp:run openid",
			"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(10 * time.Minute).Unix(),
		}
		if edit != nil {
			edit(c)
		}
		return c
	}
	b64 := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	algNone := b64(map[string]string{"alg": "none", "typ": "JWT", "kid": "k1"}) + "." + b64(claims(nil)) + "."
	algNoneCapital := b64(map[string]string{"alg": "None", "typ": "JWT"}) + "." + b64(claims(nil)) + "."
	// The classic confusion: HMAC keyed with the issuer's public key, which anyone may read.
	pub, err := json.Marshal(jose.JSONWebKey{Key: &trusted.key.PublicKey, KeyID: "k1", Algorithm: string(jose.ES256), Use: "sig"})
	if err != nil {
		t.Fatal(err)
	}
	hmac, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: pub}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	hs256, err := jwt.Signed(hmac).Claims(claims(nil)).Serialize()
	if err != nil {
		t.Fatal(err)
	}

	var tokens []string
	for _, c := range []struct {
		name, token string
		status      int
		challenge   []string // substrings of WWW-Authenticate
		logs        string   // the reason the log gives
	}{
		{"no token", "", 401, []string{`resource_metadata="` + prmURL + `"`}, "reason=\"no token\""},
		{"wrong audience", trusted.mint(t, claims(func(c map[string]any) { c["aud"] = "https://other.example.test/mcp" }), ""),
			401, []string{`error="invalid_token"`, `resource_metadata="` + prmURL + `"`}, "audience is not this resource"},
		{"expired", trusted.mint(t, claims(func(c map[string]any) {
			c["exp"] = now.Add(-10 * time.Minute).Unix()
			c["iat"], c["nbf"] = now.Add(-20*time.Minute).Unix(), now.Add(-20*time.Minute).Unix()
		}), ""), 401, []string{`error="invalid_token"`}, "token refused: expired"},
		{"not yet valid", trusted.mint(t, claims(func(c map[string]any) { c["nbf"] = now.Add(10 * time.Minute).Unix() }), ""),
			401, []string{`error="invalid_token"`}, "not valid yet (nbf)"},
		{"unknown key id", trusted.mint(t, claims(nil), "k-rogue"), 401, []string{`error="invalid_token"`}, `unknown key id \"k-rogue\"`},
		{"alg none", algNone, 401, []string{`error="invalid_token"`}, "alg none is refused"},
		{"alg None without a key id", algNoneCapital, 401, []string{`error="invalid_token"`}, "alg none is refused"},
		{"HS256 keyed with the public key", hs256, 401, []string{`error="invalid_token"`}, `signature algorithm \"HS256\" is not accepted`},
		{"no expiry", trusted.mint(t, claims(func(c map[string]any) { delete(c, "exp") }), ""), 401, []string{`error="invalid_token"`}, "no expiry (exp)"},
		{"issued in the future", trusted.mint(t, claims(func(c map[string]any) { c["iat"] = now.Add(10 * time.Minute).Unix() }), ""),
			401, []string{`error="invalid_token"`}, "issued in the future (iat)"},
		{"no tenant claim", trusted.mint(t, claims(func(c map[string]any) { delete(c, "sub") }), ""), 401, []string{`error="invalid_token"`}, "no sub claim"},
		{"garbage", "aaaa.bbbb.cccc", 401, []string{`error="invalid_token"`}, "not a signed JWT"},
		{"untrusted issuer", untrusted.mint(t, claims(func(c map[string]any) { c["iss"] = untrusted.srv.URL }), ""),
			401, []string{`error="invalid_token"`}, "untrusted issuer"},
		{"issuer claimed, other key", untrusted.mint(t, claims(nil), ""), 401, []string{`error="invalid_token"`}, "signature does not verify"},
		{"unknown subject", trusted.mint(t, claims(func(c map[string]any) { c["sub"] = "org-nobody" }), ""),
			401, []string{`error="invalid_token"`}, "names no tenant's subject"},
		{"missing scope", trusted.mint(t, claims(func(c map[string]any) { c["scope"] = "openid" }), ""),
			403, []string{`error="insufficient_scope"`, `scope="mcp:run"`, `resource_metadata="` + prmURL + `"`}, `missing scope \"mcp:run\" required by tenant acme`},
		{"valid", trusted.mint(t, claims(nil), ""), 200, nil, ""},
		{"static token beside OAuth", "static-token", 200, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.token != "" && c.token != "static-token" {
				tokens = append(tokens, c.token)
			}
			from := log.count()
			resp := send(t, initializeRequest(base+"/mcp", c.token))
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d; log:\n%s", resp.StatusCode, c.status, log.text())
			}
			got := resp.Header.Get("WWW-Authenticate")
			for _, want := range c.challenge {
				if !strings.Contains(got, want) {
					t.Errorf("WWW-Authenticate %q lacks %s", got, want)
				}
			}
			if c.logs != "" {
				log.waitAfter(t, from, c.logs)
			}
		})
	}
	out := log.text()
	for _, tok := range append(tokens, "static-token") {
		if strings.Contains(out, tok) {
			t.Errorf("the log holds a token")
		}
		// Nor any of its signature, in case a token is cut.
		if i := strings.LastIndex(tok, "."); i > 0 && len(tok)-i > 20 && strings.Contains(out, tok[i+1:]) {
			t.Errorf("the log holds a token's signature")
		}
	}
}

// TestOAuthProtectedResourceMetadata reads the document at both of its addresses and checks
// it against RFC 9728: the resource identifier (with go-sdk's client check, section 3.3), the
// authorization servers, the bearer methods.
func TestOAuthProtectedResourceMetadata(t *testing.T) {
	is := newTestIssuer(t, "k1")
	cfg := testkit.WriteConfig(t, fmt.Sprintf(oauthConfig, oauthResource, is.srv.URL, configs.HashToken("static-token")))
	base := startHTTP(t, cfg)
	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		err = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d, %v", path, resp.StatusCode, err)
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("%s: Content-Type %q", path, ct)
		}
		// RFC 9728 section 2: resource is REQUIRED; the others are optional but, when present,
		// JSON arrays of strings.
		if doc["resource"] != oauthResource {
			t.Errorf("%s: resource %v, want %s", path, doc["resource"], oauthResource)
		}
		strs := func(k string) []string {
			var out []string
			a, ok := doc[k].([]any)
			if !ok {
				t.Errorf("%s: %s is %T, want an array", path, k, doc[k])
			}
			for _, e := range a {
				s, ok := e.(string)
				if !ok {
					t.Errorf("%s: %s holds %T", path, k, e)
				}
				out = append(out, s)
			}
			return out
		}
		if got := strs("authorization_servers"); !slices.Equal(got, []string{is.srv.URL}) {
			t.Errorf("%s: authorization_servers %v", path, got)
		}
		if got := strs("bearer_methods_supported"); !slices.Equal(got, []string{"header"}) {
			t.Errorf("%s: bearer_methods_supported %v", path, got)
		}
		if got := strs("scopes_supported"); !slices.Equal(got, []string{"mcp:run"}) {
			t.Errorf("%s: scopes_supported %v", path, got)
		}
		if _, err := oauthex.GetProtectedResourceMetadata(context.Background(), base+path, oauthResource, http.DefaultClient); err != nil {
			t.Errorf("go-sdk's client refuses the document: %v", err)
		}
	}
}

// TestCheckSaysHowTenantsAuthenticate: check names, per tenant, its static tokens and the
// OAuth subjects, issuer and scopes that admit it; invalid OAuth settings are refused.
func TestCheckSaysHowTenantsAuthenticate(t *testing.T) {
	cfg := testkit.WriteConfig(t, fmt.Sprintf(oauthConfig, oauthResource, "https://login.example.test", configs.HashToken("static-token")))
	out, errOut, code := runCLI(t, "", "check", "--config", cfg)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"tenant acme        OAuth access tokens from https://login.example.test for " + oauthResource + " with sub in {org-acme} and scopes mcp:run (JWTs by the issuers' keys)",
		"tenant static      1 static bearer token(s)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check's output lacks %q:\n%s", want, out)
		}
	}
	bad := testkit.WriteConfig(t, `
data_dir: "-"
auth:
  oauth:
    resource: "http://mcp.example.test/mcp"
    issuers: [{issuer: "https://login.example.test", introspection: {client_secret: {env: S}}}]
tenants:
  a: {oauth: {subjects: [one]}, agents: {default: {}}}
  b: {oauth: {subjects: [one]}, agents: {default: {}}}
`)
	_, errOut, code = runCLI(t, "", "check", "--config", bad)
	if code != 2 {
		t.Fatalf("exit %d for an invalid auth block", code)
	}
	for _, want := range []string{"auth.oauth.resource", "auth.oauth.issuers[0].introspection.client_id", "tenants.b.oauth.subjects[0]"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("check's errors lack %s:\n%s", want, errOut)
		}
	}
}

// TestOAuthIntrospection: opaque tokens are checked at the issuer's introspection endpoint
// (RFC 7662) with the client secret from the environment; an active one for this resource
// admits its tenant, and inactive, wrong-audience and scope-less ones are refused with their
// reasons, the tokens in no log line.
func TestOAuthIntrospection(t *testing.T) {
	is := newTestIssuer(t, "k1")
	now := time.Now()
	answer := func(edit func(map[string]any)) map[string]any {
		c := map[string]any{"active": true, "iss": is.srv.URL, "sub": "org-acme", "aud": oauthResource,
			"scope": "mcp:run", "exp": now.Add(10 * time.Minute).Unix()}
		if edit != nil {
			edit(c)
		}
		return c
	}
	is.opaque["opaque-valid-0123456789"] = answer(nil)
	is.opaque["opaque-other-aud-0123456789"] = answer(func(c map[string]any) { c["aud"] = "https://other.example.test" })
	is.opaque["opaque-no-scope-0123456789"] = answer(func(c map[string]any) { c["scope"] = "openid" })
	cfg := strings.Replace(fmt.Sprintf(oauthConfig, oauthResource, is.srv.URL, configs.HashToken("static-token")),
		"issuers: [{issuer: "+fmt.Sprintf("%q", is.srv.URL)+"}]",
		"issuers: [{issuer: "+fmt.Sprintf("%q", is.srv.URL)+", introspection: {client_id: rs, client_secret: {env: MCP_SANDBOX_TEST_INTRO_SECRET}}}]", 1)
	if !strings.Contains(cfg, "introspection") {
		t.Fatal("the config has no introspection")
	}
	var log lines
	base, _ := startHTTPWatching(t, testkit.WriteConfig(t, cfg), []string{"MCP_SANDBOX_TEST_INTRO_SECRET=rs-secret"}, log.add)
	for _, c := range []struct {
		token  string
		status int
		logs   string
	}{
		{"opaque-valid-0123456789", 200, ""},
		{"opaque-valid-0123456789", 200, ""}, // from the cache
		{"opaque-unknown-0123456789", 401, "introspection says the token is not active"},
		{"opaque-other-aud-0123456789", 401, "audience is not this resource"},
		{"opaque-no-scope-0123456789", 403, `missing scope \"mcp:run\"`},
	} {
		resp := send(t, initializeRequest(base+"/mcp", c.token))
		if resp.StatusCode != c.status {
			t.Errorf("%s: status %d, want %d; log:\n%s", c.token, resp.StatusCode, c.status, log.text())
		}
		if c.logs != "" {
			log.waitFor(t, c.logs)
		}
	}
	// Each token is asked about once: the connection gate, the handler and the repeated
	// request are answered from the cache.
	is.mu.Lock()
	n := is.introspections
	is.mu.Unlock()
	if n != 4 {
		t.Errorf("%d introspection requests for 4 tokens, want 4", n)
	}
	if out := log.text(); strings.Contains(out, "opaque-") || strings.Contains(out, "rs-secret") {
		t.Errorf("the log holds a token or the client secret:\n%s", out)
	}
}

// TestOAuthSubjectsReload: a reload (SIGHUP) that adds a subject to a tenant admits that
// subject's tokens at once.
func TestOAuthSubjectsReload(t *testing.T) {
	is := newTestIssuer(t, "k1")
	body := fmt.Sprintf(oauthConfig, oauthResource, is.srv.URL, configs.HashToken("static-token"))
	cfg := testkit.WriteConfig(t, body)
	var log lines
	base, cmd := startHTTPWatching(t, cfg, nil, log.add)
	now := time.Now()
	tok := is.mint(t, map[string]any{"iss": is.srv.URL, "sub": "org-new", "aud": oauthResource, "scope": "mcp:run",
		"exp": now.Add(10 * time.Minute).Unix()}, "")
	status := func() int { return send(t, initializeRequest(base+"/mcp", tok)).StatusCode }
	if s := status(); s != 401 {
		t.Fatalf("a subject no tenant names: %d, want 401", s)
	}
	body = strings.Replace(body, `subjects: ["org-acme"]`, `subjects: ["org-acme", "org-new"]`, 1)
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGHUP)
	log.waitFor(t, "config reloaded")
	if s := status(); s != 200 {
		t.Fatalf("after the reload: %d, want 200; log:\n%s", s, log.text())
	}
}
