// Package oauthrs is the OAuth 2.1 resource server side of the HTTP face (docs/design.md §10):
// it verifies an access token as a JWT issued by one of the trusted issuers for this server's
// resource, and maps it to a tenant. Each issuer's metadata is discovered (RFC 8414, then
// OpenID discovery) and its JWKS fetched and cached with a bound; the signature is checked by
// go-jose, never by code here. A token that is not a JWS is introspected (RFC 7662) at the
// issuers configured for it, answers cached by the token's hash, bounded in number and time
// (a minute, never past exp: a reload's new subjects reach a cached token within it). A
// refusal is a *Refusal whose Reason names the check that failed and never holds the token.
//
// Imports: go-jose and the go-sdk only (docs/design.md §2); cmd converts the config.
//
// Concurrency: a Verifier is safe for concurrent use. Each issuer's keys are guarded by its
// own mutex, held across a fetch so that verifications waiting on one issuer share one fetch.
package oauthrs
