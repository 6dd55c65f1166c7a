package oauthrs

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// oidcIssuer serves only OpenID discovery (RFC 8414's URL answers 404) at a path, and a key
// set whose keys the test can rotate; it counts key set fetches.
type oidcIssuer struct {
	srv     *httptest.Server
	id      string
	mu      sync.Mutex
	keys    map[string]issuerKey // kid → key
	fetches atomic.Int32
}

// issuerKey is a signing key of an oidcIssuer and the alg its JWK names ("": none).
type issuerKey struct {
	key crypto.Signer
	alg jose.SignatureAlgorithm
}

func newOIDCIssuer(t testing.TB) *oidcIssuer {
	is := &oidcIssuer{keys: map[string]issuerKey{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /tenant-x/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"issuer": is.id, "authorization_endpoint": is.id + "/auth",
			"token_endpoint": is.id + "/token", "jwks_uri": is.id + "/keys", "response_types_supported": []string{"code"},
			"code_challenge_methods_supported": []string{"S256"}})
	})
	mux.HandleFunc("GET /tenant-x/keys", func(w http.ResponseWriter, _ *http.Request) {
		is.fetches.Add(1)
		is.mu.Lock()
		defer is.mu.Unlock()
		var set jose.JSONWebKeySet
		for kid, k := range is.keys {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.key.Public(), KeyID: kid, Algorithm: string(k.alg), Use: "sig"})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(set)
	})
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	is.id = is.srv.URL + "/tenant-x"
	return is
}

// addKey adds an ES256 key; addRSAKey an RSA key whose JWK names alg ("": none).
func (is *oidcIssuer) addKey(t testing.TB, kid string) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is.mu.Lock()
	is.keys[kid] = issuerKey{k, jose.ES256}
	is.mu.Unlock()
}

func (is *oidcIssuer) addRSAKey(t testing.TB, kid string, alg jose.SignatureAlgorithm) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is.mu.Lock()
	is.keys[kid] = issuerKey{k, alg}
	is.mu.Unlock()
}

// mint signs a token with kid's key, by the alg its JWK names; mintAs by alg.
func (is *oidcIssuer) mint(t testing.TB, kid string, now time.Time) string {
	is.mu.Lock()
	alg := is.keys[kid].alg
	is.mu.Unlock()
	return is.mintAs(t, kid, alg, now)
}

func (is *oidcIssuer) mintAs(t testing.TB, kid string, alg jose.SignatureAlgorithm, now time.Time) string {
	is.mu.Lock()
	k := is.keys[kid].key
	is.mu.Unlock()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: k}, (&jose.SignerOptions{}).WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(map[string]any{"iss": is.id, "aud": []string{"https://rs.example.test/mcp", "other"},
		"sub": "s1", "scp": []string{"run"}, "exp": now.Add(time.Hour).Unix()}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestKeysDiscoveredCachedAndRotated: an issuer with a path and only OpenID discovery is
// found; its key set is fetched once for many tokens, again for an unknown key id only after
// MinRefetch, and again after KeysTTL; a rotated-in key is then accepted.
func TestKeysDiscoveredCachedAndRotated(t *testing.T) {
	is := newOIDCIssuer(t)
	is.addKey(t, "a")
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	v := New(&Options{
		Resource: "https://rs.example.test/mcp", Issuers: []string{is.id}, Now: clock,
		KeysTTL: 10 * time.Minute, MinRefetch: 30 * time.Second,
		Tenant: func(s string) (string, []string, bool) { return "t-" + s, []string{"run"}, s == "s1" },
	})
	ctx := context.Background()
	for range 5 {
		g, err := v.Verify(ctx, is.mint(t, "a", clock()))
		if err != nil || g.Tenant != "t-s1" {
			t.Fatalf("grant %+v, %v", g, err)
		}
	}
	if n := is.fetches.Load(); n != 1 {
		t.Fatalf("%d key set fetches for five tokens, want 1", n)
	}
	is.addKey(t, "b")
	_, err := v.Verify(ctx, is.mint(t, "b", clock()))
	var r *Refusal
	if !errors.As(err, &r) || is.fetches.Load() != 1 {
		t.Fatalf("a key id unknown within MinRefetch: %v after %d fetches, want a refusal without a fetch", err, is.fetches.Load())
	}
	advance(31 * time.Second)
	if _, err := v.Verify(ctx, is.mint(t, "b", clock())); err != nil || is.fetches.Load() != 2 {
		t.Fatalf("rotated-in key after MinRefetch: %v after %d fetches, want accepted after 2", err, is.fetches.Load())
	}
	advance(11 * time.Minute)
	if _, err := v.Verify(ctx, is.mint(t, "a", clock())); err != nil || is.fetches.Load() != 3 {
		t.Fatalf("after KeysTTL: %v after %d fetches, want accepted after 3", err, is.fetches.Load())
	}
}

// TestKeyAlgEnforced (issue 38): a token signed by an algorithm other than the one its key's
// JWK names is refused, though the key verifies it (PS256 under an RS256 key: the same RSA
// key checks either padding); the named one is accepted, and a key naming none takes any
// accepted algorithm its type allows. Without a kid, a key naming another alg is passed over.
func TestKeyAlgEnforced(t *testing.T) {
	is := newOIDCIssuer(t)
	is.addRSAKey(t, "rs", jose.RS256)
	is.addRSAKey(t, "any", "")
	v := New(&Options{Resource: "https://rs.example.test/mcp", Issuers: []string{is.id},
		Tenant: func(s string) (string, []string, bool) { return s, nil, true }})
	ctx := context.Background()
	now := time.Now()
	if _, err := v.Verify(ctx, is.mintAs(t, "rs", jose.RS256, now)); err != nil {
		t.Errorf("RS256 under the RS256 key: %v", err)
	}
	var r *Refusal
	if _, err := v.Verify(ctx, is.mintAs(t, "rs", jose.PS256, now)); !errors.As(err, &r) || !strings.Contains(r.Reason, `names alg "RS256"`) {
		t.Errorf("PS256 under the RS256 key: %v, want a refusal naming the key's alg", err)
	}
	for _, alg := range []jose.SignatureAlgorithm{jose.RS256, jose.PS256, jose.PS512} {
		if _, err := v.Verify(ctx, is.mintAs(t, "any", alg, now)); err != nil {
			t.Errorf("%s under a key naming no alg: %v", alg, err)
		}
	}
}

// BenchmarkVerify is one ES256 access token's verification with the issuer's keys cached:
// the cost each OAuth request adds (twice: the connection gate and the handler).
func BenchmarkVerify(b *testing.B) {
	is := newOIDCIssuer(b)
	is.addKey(b, "a")
	v := New(&Options{Resource: "https://rs.example.test/mcp", Issuers: []string{is.id},
		Tenant: func(s string) (string, []string, bool) { return s, nil, true }})
	tok := is.mint(b, "a", time.Now())
	if _, err := v.Verify(context.Background(), tok); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(context.Background(), tok); err != nil {
			b.Fatal(err)
		}
	}
}
