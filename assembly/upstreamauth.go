package assembly

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

// upstreamAuth is how the server authenticates to one upstream, as doctor and check say it.
type upstreamAuth struct {
	// Kind is "command" (a local process, no credential), "none", "bearer" or "oauth".
	Kind string `json:"kind"`
	// Bearer says where a static bearer is read: "env NAME" or "file PATH".
	Bearer string             `json:"bearer,omitempty"`
	OAuth  *upstreamOAuthAuth `json:"oauth,omitempty"`
}

type upstreamOAuthAuth struct {
	// Issuer is empty when the authorization server is discovered from the upstream's
	// Protected Resource Metadata.
	Issuer       string   `json:"issuer,omitempty"`
	ClientID     string   `json:"client_id"`
	ClientSecret string   `json:"client_secret"` // where it is read: "env NAME" or "file PATH"
	Scopes       []string `json:"scopes"`
	Resource     string   `json:"resource,omitempty"`
	// Token is what asking the authorization server for a token gave: "obtained", or why
	// none could be had (the words the model would read). Empty when nobody asked.
	Token string `json:"token,omitempty"`
}

func credentialWhere(c configs.Credential) string {
	if c.Env != "" {
		return "env " + c.Env
	}
	return "file " + c.File
}

// upstreamAuthOf says, per upstream, how the server authenticates to it. With probe, each
// OAuth upstream's authorization server is asked for a token (which is dropped, never sent
// anywhere), at most within timeout, all at once.
func upstreamAuthOf(ctx context.Context, cfg *Config, probe bool, timeout time.Duration) map[string]upstreamAuth {
	out := map[string]upstreamAuth{}
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	for _, name := range sortedKeys(cfg.Upstreams) {
		u := cfg.Upstreams[name]
		bearer := u.Bearer
		if u.A2A != nil {
			bearer = u.A2A.Bearer
		}
		var a upstreamAuth
		switch {
		case len(u.Command) > 0:
			a.Kind = "command"
		case u.OAuth != nil:
			o := u.OAuth
			a.Kind = "oauth"
			a.OAuth = &upstreamOAuthAuth{Issuer: o.Issuer, ClientID: o.ClientID, ClientSecret: credentialWhere(o.ClientSecret),
				Scopes: append([]string{}, o.Scopes...), Resource: o.Resource}
			if probe {
				src, oa := cfg.oauthSource(cfg.upstreamServer(name, u).URL, o), a.OAuth
				wg.Go(func() {
					pctx, cancel := context.WithTimeout(ctx, timeout)
					defer cancel()
					state := "obtained"
					if _, err := src.Token(pctx); err != nil {
						state = tokenProblem(err)
					}
					mu.Lock()
					oa.Token = state
					mu.Unlock()
				})
			}
		case bearer != nil:
			a.Kind, a.Bearer = "bearer", credentialWhere(*bearer)
		default:
			a.Kind = "none"
		}
		mu.Lock()
		out[name] = a
		mu.Unlock()
	}
	wg.Wait()
	return out
}

// tokenProblem is why no token could be had, in the words the model would read.
func tokenProblem(err error) string {
	var ce *upstream.CredentialError
	switch {
	case errors.As(err, &ce) && ce.Reason != "":
		return ce.Reason
	case errors.Is(err, context.DeadlineExceeded):
		return "its OAuth authorization server did not answer in time"
	}
	return "no token could be had"
}

// writeUpstreamAuth prints upstreamAuthOf, a line per upstream.
func writeUpstreamAuth(w io.Writer, auth map[string]upstreamAuth) {
	if len(auth) == 0 {
		return
	}
	fmt.Fprintln(w, "how the server authenticates to upstreams:")
	for _, name := range sortedKeys(auth) {
		a := auth[name]
		var way string
		switch a.Kind {
		case "command":
			way = "a local command: no credential"
		case "none":
			way = "no credential"
		case "bearer":
			way = "a static bearer from " + a.Bearer
		case "oauth":
			o := a.OAuth
			issuer := o.Issuer
			if issuer == "" {
				issuer = "the authorization server its resource metadata names"
			}
			way = fmt.Sprintf("OAuth client credentials: client %s at %s, secret from %s", o.ClientID, issuer, o.ClientSecret)
			if len(o.Scopes) > 0 {
				way += ", scopes " + strings.Join(o.Scopes, " ")
			}
			if o.Resource != "" {
				way += ", for " + o.Resource
			}
			switch o.Token {
			case "":
			case "obtained":
				way += ": a token was obtained"
			default:
				way += ": NO TOKEN: " + o.Token
			}
		}
		fmt.Fprintf(w, "  upstream %-11s %s\n", name, way)
	}
}

// tokenWarnings are check's warnings for the OAuth upstreams no token could be had for.
func tokenWarnings(auth map[string]upstreamAuth) []string {
	var out []string
	for _, name := range sortedKeys(auth) {
		if o := auth[name].OAuth; o != nil && o.Token != "" && o.Token != "obtained" {
			out = append(out, fmt.Sprintf("upstreams.%s.oauth: no access token could be had: %s; that upstream will be unavailable", name, o.Token))
		}
	}
	return out
}

// tokenProbeTimeout bounds how long check and doctor wait for an authorization server.
const tokenProbeTimeout = 20 * time.Second

// Authentication is how tenants authenticate to the server and how it authenticates to each
// upstream, as check and doctor print it.
type Authentication struct {
	cfg       *Config
	upstreams map[string]upstreamAuth
}

// ProbeAuthentication reads cfg's authentication, asking each OAuth upstream's authorization
// server for a token (dropped, never sent anywhere), all at once and each within
// tokenProbeTimeout.
func ProbeAuthentication(ctx context.Context, cfg *Config) *Authentication {
	return &Authentication{cfg: cfg, upstreams: upstreamAuthOf(ctx, cfg, true, tokenProbeTimeout)}
}

// Warnings are check's warnings for the OAuth upstreams no token could be had for.
func (a *Authentication) Warnings() []string { return tokenWarnings(a.upstreams) }

// WriteText writes how each tenant authenticates, then how the server authenticates to each
// upstream.
func (a *Authentication) WriteText(w io.Writer) {
	writeTenantAuth(w, a.cfg)
	writeUpstreamAuth(w, a.upstreams)
}
