package assembly

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/mcp-sandbox/mcp-sandbox/mcpserver"
	"github.com/mcp-sandbox/mcp-sandbox/mcpserver/oauthrs"
)

// oauthSubject is what a token subject admits: a tenant and the scopes it requires.
type oauthSubject struct {
	tenant string
	scopes []string
}

// oauthSubjects maps each subject of the tenants' oauth blocks to its tenant.
func oauthSubjects(cfg *Config) map[string]oauthSubject {
	m := map[string]oauthSubject{}
	for _, tname := range sortedKeys(cfg.Tenants) {
		if t := cfg.Tenants[tname].OAuth; t != nil {
			for _, s := range t.Subjects {
				m[s] = oauthSubject{tenant: tname, scopes: t.Scopes}
			}
		}
	}
	return m
}

// prmPath is where RFC 9728 §3.1 puts a resource's metadata: the well-known prefix followed
// by the resource's path, on the resource's origin.
func prmPath(resource string) (metadataURL, path string) {
	u, err := url.Parse(resource)
	if err != nil {
		return "", ""
	}
	path = "/.well-known/oauth-protected-resource" + strings.TrimSuffix(u.EscapedPath(), "/")
	return u.Scheme + "://" + u.Host + path, path
}

// newOAuth wires auth.oauth into the HTTP face: a verifier whose subjects follow reloads
// (subjects), and the resource metadata. nil when the config has no auth.oauth.
func newOAuth(cfg *Config, subjects *atomic.Pointer[map[string]oauthSubject]) *mcpserver.OAuth {
	o := cfg.Auth.OAuth
	if o == nil {
		return nil
	}
	issuers := make([]string, 0, len(o.Issuers))
	intro := map[string]*oauthrs.Introspection{}
	for _, is := range o.Issuers {
		issuers = append(issuers, is.Issuer)
		if in := is.Introspection; in != nil {
			secret := in.ClientSecret
			intro[is.Issuer] = &oauthrs.Introspection{ClientID: in.ClientID,
				Secret: func() (string, error) { return cfg.resolve(secret) }}
		}
	}
	v := oauthrs.New(&oauthrs.Options{
		Resource:      o.Resource,
		Issuers:       issuers,
		Introspection: intro,
		TenantClaim:   o.TenantClaim,
		Tenant: func(subject string) (string, []string, bool) {
			s, ok := (*subjects.Load())[subject]
			return s.tenant, s.scopes, ok
		},
	})
	var scopes []string
	for _, t := range cfg.Tenants {
		if t.OAuth != nil {
			scopes = append(scopes, t.OAuth.Scopes...)
		}
	}
	slices.Sort(scopes)
	murl, mpath := prmPath(o.Resource)
	return &mcpserver.OAuth{
		Metadata:     v.Metadata(slices.Compact(scopes)),
		MetadataURL:  murl,
		MetadataPath: mpath,
		Verify: func(ctx context.Context, token string) (string, error) {
			g, err := v.Verify(ctx, token)
			if err != nil {
				return "", err
			}
			return g.Tenant, nil
		},
	}
}

// tenantAuth is how one tenant's HTTP callers authenticate, as doctor and check say it.
type tenantAuth struct {
	StaticTokens int              `json:"static_tokens"`
	OAuth        *tenantOAuthAuth `json:"oauth,omitempty"`
}

type tenantOAuthAuth struct {
	Issuers  []string `json:"issuers"`
	Resource string   `json:"resource"`
	Claim    string   `json:"claim"`
	Subjects []string `json:"subjects"`
	Scopes   []string `json:"scopes"`
	// Introspected are the issuers that check opaque tokens by introspection.
	Introspected []string `json:"introspected,omitempty"`
}

// tenantAuthOf says, per tenant, how it authenticates over HTTP.
func tenantAuthOf(cfg *Config) map[string]tenantAuth {
	out := map[string]tenantAuth{}
	for _, name := range sortedKeys(cfg.Tenants) {
		t := cfg.Tenants[name]
		a := tenantAuth{StaticTokens: len(t.Tokens)}
		if o := cfg.Auth.OAuth; o != nil && t.OAuth != nil {
			claim := o.TenantClaim
			if claim == "" {
				claim = "sub"
			}
			a.OAuth = &tenantOAuthAuth{Resource: o.Resource, Claim: claim, Subjects: t.OAuth.Subjects, Scopes: t.OAuth.Scopes}
			for _, is := range o.Issuers {
				a.OAuth.Issuers = append(a.OAuth.Issuers, is.Issuer)
				if is.Introspection != nil {
					a.OAuth.Introspected = append(a.OAuth.Introspected, is.Issuer)
				}
			}
			if a.OAuth.Scopes == nil {
				a.OAuth.Scopes = []string{}
			}
		}
		out[name] = a
	}
	return out
}

// writeTenantAuth prints tenantAuthOf, a line per tenant.
func writeTenantAuth(w io.Writer, cfg *Config) {
	fmt.Fprintln(w, "how tenants authenticate over HTTP:")
	auth := tenantAuthOf(cfg)
	for _, name := range sortedKeys(auth) {
		a := auth[name]
		var ways []string
		if a.StaticTokens > 0 {
			ways = append(ways, fmt.Sprintf("%d static bearer token(s)", a.StaticTokens))
		}
		if o := a.OAuth; o != nil {
			scopes := "no scope required"
			if len(o.Scopes) > 0 {
				scopes = "scopes " + strings.Join(o.Scopes, " ")
			}
			way := fmt.Sprintf("OAuth access tokens from %s for %s with %s in {%s} and %s",
				strings.Join(o.Issuers, ", "), o.Resource, o.Claim, strings.Join(o.Subjects, ", "), scopes)
			if len(o.Introspected) > 0 {
				way += " (JWTs by the issuers' keys, opaque tokens by introspection at " + strings.Join(o.Introspected, ", ") + ")"
			} else {
				way += " (JWTs by the issuers' keys)"
			}
			ways = append(ways, way)
		}
		if len(ways) == 0 {
			ways = append(ways, "no credential (only tokenless on loopback, when it is the only tenant and no tenant has one)")
		}
		fmt.Fprintf(w, "  tenant %-11s %s\n", name, strings.Join(ways, "; and "))
	}
}
