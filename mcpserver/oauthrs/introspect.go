package oauthrs

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Introspection is the client an issuer's introspection endpoint (RFC 7662) is called as,
// with HTTP Basic authentication.
type Introspection struct {
	ClientID string
	// Secret returns the client secret, read fresh at each call.
	Secret func() (string, error)
}

// maxCached bounds the introspection answers kept; introTTL bounds how long an active
// answer is used (never past the token's exp), inactiveTTL an inactive one.
const (
	maxCached   = 4096
	introTTL    = time.Minute
	inactiveTTL = 10 * time.Second
)

// introspect asks each issuer with an introspection client about an opaque token, in the
// configured order, and takes the first active answer.
func (v *Verifier) introspect(ctx context.Context, token string) (*Grant, error) {
	key := sha256.Sum256([]byte(token))
	if g, err, ok := v.cache.get(key, v.o.Now()); ok {
		return g, err
	}
	var failures []error
	asked := false
	for _, id := range v.o.Issuers {
		iss := v.issuers[id]
		if iss.intro == nil {
			continue
		}
		asked = true
		claims, err := iss.introspect(ctx, v, token)
		if err != nil {
			failures = append(failures, err)
			continue
		}
		if active, _ := claims["active"].(bool); !active {
			continue
		}
		g, err := v.checkIntrospected(claims, iss.id)
		until := v.o.Now().Add(introTTL)
		if g != nil && g.Expiry.Before(until) {
			until = g.Expiry
		}
		v.cache.put(key, g, err, until, v.o.Now())
		return g, err
	}
	switch {
	case !asked:
		return nil, refuse("not a signed JWT, and no issuer has introspection for opaque tokens")
	case len(failures) > 0:
		// Not cached: the next request asks again.
		return nil, errors.Join(failures...)
	}
	err := refuse("introspection says the token is not active")
	v.cache.put(key, nil, err, v.o.Now().Add(inactiveTTL), v.o.Now())
	return nil, err
}

// checkIntrospected applies the JWT checks to an active introspection answer (RFC 7662
// section 2.2): issuer when named, audience (required: tokens are audience-bound), exp and nbf.
func (v *Verifier) checkIntrospected(c map[string]any, issuer string) (*Grant, error) {
	if s, ok := c["iss"].(string); ok && s != issuer {
		return nil, refuse("introspection by %s names another issuer", issuer)
	}
	var aud []string
	switch a := c["aud"].(type) {
	case string:
		aud = []string{a}
	case []any:
		for _, e := range a {
			if s, ok := e.(string); ok {
				aud = append(aud, s)
			}
		}
	}
	found := false
	for _, a := range aud {
		found = found || a == v.o.Resource
	}
	if !found {
		return nil, refuse("audience is not this resource (%s)", v.o.Resource)
	}
	now := v.o.Now()
	exp, ok := c["exp"].(float64)
	if !ok {
		return nil, refuse("no expiry (exp)")
	}
	expiry := time.Unix(int64(exp), 0)
	if now.After(expiry.Add(v.o.Skew)) {
		return nil, refuse("expired")
	}
	if nbf, ok := c["nbf"].(float64); ok && now.Add(v.o.Skew).Before(time.Unix(int64(nbf), 0)) {
		return nil, refuse("not valid yet (nbf)")
	}
	return v.grant(c, issuer, expiry)
}

// introspect posts token to the issuer's introspection endpoint (discovered with its keys).
func (i *issuer) introspect(ctx context.Context, v *Verifier, token string) (map[string]any, error) {
	i.mu.Lock()
	if i.meta == nil || v.o.Now().Sub(i.fetched) > v.o.KeysTTL {
		if err := i.fetch(ctx, v); err != nil {
			i.mu.Unlock()
			return nil, err
		}
	}
	endpoint := i.meta.IntrospectionEndpoint
	i.mu.Unlock()
	if endpoint == "" {
		return nil, fmt.Errorf("issuer %s: its metadata names no introspection_endpoint", i.id)
	}
	secret, err := i.intro.Secret()
	if err != nil {
		return nil, fmt.Errorf("issuer %s: introspection client secret: %w", i.id, err)
	}
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("issuer %s: introspection_endpoint: %w", i.id, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(url.QueryEscape(i.intro.ClientID), url.QueryEscape(secret))
	resp, err := v.o.HTTPClient.Do(req)
	if err != nil {
		// The error names the endpoint, never the form (which holds the token).
		return nil, fmt.Errorf("issuer %s: introspection failed: %w", i.id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("issuer %s: introspection answered %s", i.id, resp.Status)
	}
	var claims map[string]any
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&claims); err != nil {
		return nil, fmt.Errorf("issuer %s: introspection answer is not JSON: %w", i.id, err)
	}
	return claims, nil
}

// introCache keeps introspection answers by the token's SHA-256 (never the token), at most
// max of them: a full cache first drops the expired ones, then an arbitrary one.
type introCache struct {
	mu      sync.Mutex
	max     int
	entries map[[32]byte]introEntry
}

type introEntry struct {
	grant *Grant
	err   error
	until time.Time
}

func newIntroCache(max int) *introCache {
	return &introCache{max: max, entries: map[[32]byte]introEntry{}}
}

func (c *introCache) get(k [32]byte, now time.Time) (*Grant, error, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok || now.After(e.until) {
		return nil, nil, false
	}
	return e.grant, e.err, true
}

func (c *introCache) put(k [32]byte, g *Grant, err error, until, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.max {
		for key, e := range c.entries {
			if now.After(e.until) {
				delete(c.entries, key)
			}
		}
		for key := range c.entries {
			if len(c.entries) < c.max {
				break
			}
			delete(c.entries, key)
		}
	}
	c.entries[k] = introEntry{grant: g, err: err, until: until}
}
