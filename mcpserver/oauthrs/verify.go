package oauthrs

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Options configure a Verifier. Resource, Issuers and Tenant are required.
type Options struct {
	// Resource is this server's resource URI: a token's audience must contain it (RFC 8707).
	Resource string
	// Issuers are the trusted issuers' identifiers.
	Issuers []string
	// Introspection, by issuer identifier, is the client this server introspects opaque
	// tokens as (RFC 7662) at that issuer. A token that is not a JWS goes to each of them in
	// turn; without any, it is refused.
	Introspection map[string]*Introspection
	// TenantClaim names the claim whose value is a tenant's subject (default "sub").
	TenantClaim string
	// Tenant maps a subject to its tenant and the scopes that tenant requires; ok false when
	// no tenant admits the subject. It is asked at every verification, so it may follow
	// reloads, and must be safe for concurrent use.
	Tenant func(subject string) (tenant string, scopes []string, ok bool)
	// HTTPClient fetches metadata and key sets (default a client with a 10 s timeout).
	HTTPClient *http.Client
	// Skew is the tolerance on exp, nbf and iat (default 30 s).
	Skew time.Duration
	// KeysTTL is how long a fetched key set is used before it is fetched again (default 10
	// minutes); an unknown key id fetches it again at most once per MinRefetch (default 30 s).
	KeysTTL, MinRefetch time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Grant is what a verified token admits.
type Grant struct {
	Tenant  string
	Subject string
	Issuer  string
	Scopes  []string
	Expiry  time.Time
}

// Refusal is why a token was refused. Reason is one short phrase naming the failed check
// (never the token or a claim's value beyond the issuer); Forbidden marks a valid token that
// lacks a required scope (403 insufficient_scope, Scopes naming what was required).
type Refusal struct {
	Reason    string
	Forbidden bool
	Scopes    []string
}

func (r *Refusal) Error() string { return "token refused: " + r.Reason }

// InsufficientScope reports whether the token was valid but lacked a required scope.
func (r *Refusal) InsufficientScope() bool { return r.Forbidden }

// RequiredScopes are the scopes the tenant requires, for the 403's challenge.
func (r *Refusal) RequiredScopes() []string { return r.Scopes }

func refuse(format string, args ...any) *Refusal {
	return &Refusal{Reason: fmt.Sprintf(format, args...)}
}

// algorithms are the asymmetric JWS algorithms accepted; none and the HMAC ones never are.
var algorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// Verifier verifies access tokens. Build it with New.
type Verifier struct {
	o       Options
	issuers map[string]*issuer
	cache   *introCache // introspection answers by the token's SHA-256
}

type issuer struct {
	id    string
	intro *Introspection

	mu      sync.Mutex
	keys    *jose.JSONWebKeySet
	meta    *oauthex.AuthServerMeta
	fetched time.Time
	// failed and failure are the last failed fetch: for retryAfter, verifications get its
	// error rather than each asking the issuer again.
	failed  time.Time
	failure error
}

// retryAfter is how long a failed fetch is not repeated.
const retryAfter = 5 * time.Second

// New returns a Verifier; it fetches nothing until the first token.
func New(options *Options) *Verifier {
	o := *options
	if o.TenantClaim == "" {
		o.TenantClaim = "sub"
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if o.Skew <= 0 {
		o.Skew = 30 * time.Second
	}
	if o.KeysTTL <= 0 {
		o.KeysTTL = 10 * time.Minute
	}
	if o.MinRefetch <= 0 {
		o.MinRefetch = 30 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	v := &Verifier{o: o, issuers: map[string]*issuer{}, cache: newIntroCache(maxCached)}
	for _, id := range o.Issuers {
		v.issuers[id] = &issuer{id: id, intro: o.Introspection[id]}
	}
	return v
}

// Metadata is this resource's Protected Resource Metadata (RFC 9728).
func (v *Verifier) Metadata(scopes []string) *oauthex.ProtectedResourceMetadata {
	return &oauthex.ProtectedResourceMetadata{
		Resource:               v.o.Resource,
		AuthorizationServers:   slices.Clone(v.o.Issuers),
		ScopesSupported:        scopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "mcp-sandbox",
	}
}

// Verify checks token and returns its grant, or a *Refusal (or, when an issuer could not be
// reached, an error saying so).
func (v *Verifier) Verify(ctx context.Context, token string) (*Grant, error) {
	if alg := headerAlg(token); strings.EqualFold(alg, "none") {
		return nil, refuse("alg none is refused")
	}
	tok, err := jwt.ParseSigned(token, algorithms)
	if err != nil {
		alg := headerAlg(token)
		if alg != "" && !slices.Contains(algorithms, jose.SignatureAlgorithm(alg)) {
			return nil, refuse("signature algorithm %q is not accepted", alg)
		}
		if alg == "" && strings.Count(token, ".") != 2 {
			return v.introspect(ctx, token)
		}
		return nil, refuse("not a signed JWT")
	}
	if len(tok.Headers) != 1 {
		return nil, refuse("not a signed JWT with one signature")
	}
	var unverified jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return nil, refuse("claims are not valid JSON")
	}
	iss, ok := v.issuers[unverified.Issuer]
	if !ok {
		return nil, refuse("untrusted issuer %q", truncate(unverified.Issuer, 200))
	}
	kid, alg := tok.Headers[0].KeyID, tok.Headers[0].Algorithm
	key, err := iss.key(ctx, v, kid, alg)
	if err != nil {
		return nil, err
	}
	var claims jwt.Claims
	extra := map[string]any{}
	if err := tok.Claims(key, &claims, &extra); err != nil {
		return nil, refuse("signature does not verify with key %q of issuer %s", truncate(kid, 100), iss.id)
	}
	err = claims.ValidateWithLeeway(jwt.Expected{Issuer: iss.id, AnyAudience: jwt.Audience{v.o.Resource}, Time: v.o.Now()}, v.o.Skew)
	switch {
	case errors.Is(err, jwt.ErrInvalidAudience):
		return nil, refuse("audience is not this resource (%s)", v.o.Resource)
	case errors.Is(err, jwt.ErrExpired):
		return nil, refuse("expired")
	case errors.Is(err, jwt.ErrNotValidYet):
		return nil, refuse("not valid yet (nbf)")
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return nil, refuse("issued in the future (iat)")
	case err != nil:
		return nil, refuse("claims invalid")
	}
	if claims.Expiry == nil {
		return nil, refuse("no expiry (exp)")
	}
	return v.grant(extra, iss.id, claims.Expiry.Time())
}

// grant maps verified claims to their tenant and checks the tenant's scopes.
func (v *Verifier) grant(claims map[string]any, issuer string, expiry time.Time) (*Grant, error) {
	subject, _ := claims[v.o.TenantClaim].(string)
	if subject == "" {
		return nil, refuse("no %s claim", v.o.TenantClaim)
	}
	tenant, required, ok := v.o.Tenant(subject)
	if !ok {
		return nil, refuse("the %s claim names no tenant's subject", v.o.TenantClaim)
	}
	scopes := tokenScopes(claims)
	for _, s := range required {
		if !slices.Contains(scopes, s) {
			return nil, &Refusal{Reason: fmt.Sprintf("missing scope %q required by tenant %s", s, tenant), Forbidden: true, Scopes: required}
		}
	}
	return &Grant{Tenant: tenant, Subject: subject, Issuer: issuer, Scopes: scopes, Expiry: expiry}, nil
}

// tokenScopes reads "scope" (a space-separated string, RFC 9068) or "scp" (an array).
func tokenScopes(extra map[string]any) []string {
	if s, ok := extra["scope"].(string); ok {
		return strings.Fields(s)
	}
	var out []string
	if a, ok := extra["scp"].([]any); ok {
		for _, e := range a {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// headerAlg is the alg of a compact JWS's header, or "" when it cannot be read. It is used
// only to say why a token is refused, never to accept one.
func headerAlg(token string) string {
	h, _, ok := strings.Cut(token, ".")
	if !ok {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(h)
	if err != nil {
		return ""
	}
	var hdr struct {
		Alg string `json:"alg"`
	}
	if json.Unmarshal(b, &hdr) != nil {
		return ""
	}
	return truncate(hdr.Alg, 20)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// key finds kid in the issuer's key set, fetching the set when it is absent or stale, or
// when kid is unknown and the set was fetched more than MinRefetch ago.
func (i *issuer) key(ctx context.Context, v *Verifier, kid, alg string) (any, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	now := v.o.Now()
	if i.keys == nil || now.Sub(i.fetched) > v.o.KeysTTL {
		if err := i.fetch(ctx, v); err != nil {
			return nil, err
		}
	}
	k, other := lookup(i.keys, kid, alg)
	if k == nil && other == "" && now.Sub(i.fetched) > v.o.MinRefetch {
		if err := i.fetch(ctx, v); err != nil {
			return nil, err
		}
		k, other = lookup(i.keys, kid, alg)
	}
	switch {
	case k != nil:
		return k, nil
	case other != "":
		return nil, refuse("key %q of issuer %s names alg %q, and the token was signed with %q", truncate(kid, 100), i.id,
			truncate(other, 20), truncate(alg, 20))
	}
	return nil, refuse("unknown key id %q for issuer %s", truncate(kid, 100), i.id)
}

// lookup finds the public signing key kid names (any, without a kid) for a token signed with
// alg: a key whose JWK names an alg serves that alg only (RFC 7517 §4.4), so an RSA key for
// RS256 does not verify a PS256 token, nor an EC key published for one curve's alg another's.
// other is the alg of a key that matched but for its alg, when none served.
func lookup(set *jose.JSONWebKeySet, kid, alg string) (key any, other string) {
	var match []jose.JSONWebKey
	if kid == "" {
		match = set.Keys
	} else {
		match = set.Key(kid)
	}
	for _, k := range match {
		if (k.Use == "" || k.Use == "sig") && k.IsPublic() {
			if k.Algorithm != "" && k.Algorithm != alg {
				other = k.Algorithm
				continue
			}
			return k.Key, ""
		}
	}
	return nil, other
}

// fetch discovers the issuer's jwks_uri and reads the key set (at most 1 MiB), unless the
// last attempt failed less than retryAfter ago.
func (i *issuer) fetch(ctx context.Context, v *Verifier) error {
	if i.failure != nil && v.o.Now().Sub(i.failed) < retryAfter {
		return i.failure
	}
	err := i.fetchNow(ctx, v)
	if err != nil {
		i.failed, i.failure = v.o.Now(), err
		return err
	}
	i.failure = nil
	return nil
}

func (i *issuer) fetchNow(ctx context.Context, v *Verifier) error {
	meta, err := discover(ctx, i.id, v.o.HTTPClient)
	if err != nil {
		return fmt.Errorf("issuer %s: %w", i.id, err)
	}
	i.meta = meta
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, meta.JWKSURI, nil)
	if err != nil {
		return fmt.Errorf("issuer %s: jwks_uri: %w", i.id, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := v.o.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("issuer %s: fetching its key set: %w", i.id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("issuer %s: fetching its key set: %s", i.id, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("issuer %s: reading its key set: %w", i.id, err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return fmt.Errorf("issuer %s: its key set is not a JWKS: %w", i.id, err)
	}
	i.keys, i.fetched = &set, v.o.Now()
	return nil
}

// discover reads the issuer's metadata: RFC 8414's well-known URL first, then OpenID
// Connect discovery's.
func discover(ctx context.Context, id string, c *http.Client) (*oauthex.AuthServerMeta, error) {
	base, path := id, ""
	if rest, ok := strings.CutPrefix(id, "https://"); ok {
		host, p, _ := strings.Cut(rest, "/")
		base, path = "https://"+host, strings.TrimSuffix("/"+p, "/")
	} else if rest, ok := strings.CutPrefix(id, "http://"); ok {
		host, p, _ := strings.Cut(rest, "/")
		base, path = "http://"+host, strings.TrimSuffix("/"+p, "/")
	}
	var errs []error
	for _, u := range []string{
		base + "/.well-known/oauth-authorization-server" + path,
		strings.TrimSuffix(id, "/") + "/.well-known/openid-configuration",
	} {
		meta, err := oauthex.GetAuthServerMeta(ctx, u, id, c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if meta != nil && meta.JWKSURI != "" {
			return meta, nil
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("discovering its metadata: %w", errors.Join(errs...))
	}
	return nil, errors.New("neither RFC 8414 nor OpenID discovery names a jwks_uri")
}
