// Package oauthclient gets an upstream's OAuth access tokens by the client-credentials grant
// (RFC 6749 §4.4) for upstream.Server's OAuth (docs/design.md §10, "OAuth to upstreams"). The
// token endpoint is found by the issuer's metadata (RFC 8414, then OpenID discovery), or,
// without a configured issuer, through the upstream's Protected Resource Metadata (RFC 9728);
// the token is asked for the upstream's resource (RFC 8707) and kept until shortly before it
// expires. The exchange itself is golang.org/x/oauth2's, the discovery the go-sdk's oauthex.
// The client secret is resolved at every exchange (a rotated secret takes effect at the next)
// and never kept; neither it nor a token appears in an error.
//
// It imports upstream (its CredentialError), the go-sdk (auth and oauthex) and x/oauth2 (the
// token request), never configs: cmd converts.
//
// Concurrency: a Source is safe for concurrent use. One exchange runs at a time; callers that
// need a token meanwhile wait for it (or for their context) and share its answer.
package oauthclient
