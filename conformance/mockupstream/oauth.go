package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// guard is the mock's OAuth resource server (--oauth-issuer): every request to /mcp must carry
// a JWT access token signed by a key of the issuer's JWKS (found by OpenID discovery), issued
// by it, for the audience, and not expired (no leeway, so that a token kept past its expiry is
// refused). A refusal is 401 with a WWW-Authenticate naming the Protected Resource Metadata,
// which /.well-known/oauth-protected-resource/mcp serves. The tokens it admitted are appended,
// one a line, to the file MOCK_TOKEN_FILE names, so that a test can look for them where they
// must not be.
type guard struct {
	issuer, audience, metadataURL string
	tokenFile                     string

	mu   sync.Mutex
	keys *jose.JSONWebKeySet
	seen map[string]bool
}

// grant is what a verified token said, handed to the whoami tool.
type grant struct {
	JTI      string  `json:"jti"`
	ClientID string  `json:"client_id"`
	Scope    string  `json:"scope"`
	Expiry   int64   `json:"exp"`
	Seen     float64 `json:"seen"` // when the request carrying it arrived, unix seconds
}

type grantKey struct{}

func (g *guard) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		gr, err := g.verify(r.Context(), tok)
		if !ok || err != nil {
			if err == nil {
				err = errors.New("no bearer token")
			}
			fmt.Fprintln(os.Stderr, "mockupstream: refused a request:", err)
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="invalid_token", resource_metadata=%q`, g.metadataURL))
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		g.record(tok)
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), grantKey{}, gr)))
	})
}

func (g *guard) metadata(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"resource": g.audience, "authorization_servers": []string{g.issuer},
		"bearer_methods_supported": []string{"header"}})
}

func (g *guard) record(tok string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen[tok] || g.tokenFile == "" {
		return
	}
	g.seen[tok] = true
	f, err := os.OpenFile(g.tokenFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err == nil {
		fmt.Fprintln(f, tok)
		f.Close()
	}
}

func (g *guard) verify(ctx context.Context, raw string) (grant, error) {
	now := time.Now()
	tok, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{jose.ES256, jose.RS256, jose.PS256, jose.EdDSA})
	if err != nil {
		return grant{}, fmt.Errorf("not a JWS: %w", err)
	}
	if len(tok.Headers) != 1 {
		return grant{}, errors.New("not one signature")
	}
	key, err := g.key(ctx, tok.Headers[0].KeyID)
	if err != nil {
		return grant{}, err
	}
	var std jwt.Claims
	var extra struct {
		ClientID string `json:"client_id"`
		Scope    string `json:"scope"`
	}
	if err := tok.Claims(key, &std, &extra); err != nil {
		return grant{}, fmt.Errorf("signature: %w", err)
	}
	if err := std.ValidateWithLeeway(jwt.Expected{Issuer: g.issuer, AnyAudience: jwt.Audience{g.audience}, Time: now}, 0); err != nil {
		return grant{}, fmt.Errorf("claims: %w", err)
	}
	gr := grant{JTI: std.ID, ClientID: extra.ClientID, Scope: extra.Scope, Seen: float64(now.UnixMilli()) / 1000}
	if std.Expiry != nil {
		gr.Expiry = std.Expiry.Time().Unix()
	}
	return gr, nil
}

// key finds kid in the issuer's key set, fetching the set when it is not known yet.
func (g *guard) key(ctx context.Context, kid string) (*jose.JSONWebKey, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for attempt := 0; attempt < 2; attempt++ {
		if g.keys != nil {
			if ks := g.keys.Key(kid); len(ks) > 0 {
				return &ks[0], nil
			}
			if attempt > 0 {
				break
			}
		}
		var meta struct {
			JWKSURI string `json:"jwks_uri"`
		}
		if err := getJSON(ctx, strings.TrimSuffix(g.issuer, "/")+"/.well-known/openid-configuration", &meta); err != nil {
			return nil, err
		}
		var set jose.JSONWebKeySet
		if err := getJSON(ctx, meta.JWKSURI, &set); err != nil {
			return nil, err
		}
		g.keys = &set
	}
	return nil, fmt.Errorf("unknown key id %q", kid)
}

func getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(v)
}

// addWhoami adds whoami: what the token of the request that called it said (jti, client_id,
// scope, exp) and when that request arrived.
func addWhoami(s *server.MCPServer) {
	s.AddTool(mcp.NewTool("whoami", mcp.WithDescription("Says which access token the call came with."), safe()),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			gr, ok := ctx.Value(grantKey{}).(grant)
			if !ok {
				return mcp.NewToolResultError("no token came with this call"), nil
			}
			return mcp.NewToolResultStructured(gr, gr.JTI), nil
		})
}

// grantContext carries the request's grant into the tool handler's context.
func grantContext(ctx context.Context, r *http.Request) context.Context {
	if gr, ok := r.Context().Value(grantKey{}).(grant); ok {
		return context.WithValue(ctx, grantKey{}, gr)
	}
	return ctx
}
