// Package httpguard bounds what one client can hold of an HTTP listener, for every server the
// command runs on one (serve's streamable HTTP, sandbox-service): Limits' timeouts for a
// request to arrive, each write of its response to leave and a keep-alive connection to idle
// (none of which cuts a response streaming for as long as its program runs); a Listener's
// caps on connections, overall and per remote address, answered with a 503 that says which;
// and Gate, which closes within PreAuthTimeout, or after its answer, a connection that has
// carried no authenticated request, and keeps such connections out of the last AuthReserve
// share of the cap, so connections opened without a token cannot shut a tenant out. Whether a
// request is authenticated is the handler's own decision, handed to Gate (docs/design.md
// §14.4). Only cmd imports it.
//
// It imports the standard library only. A Listener and the handlers it wraps are safe for
// concurrent use; Close waits for the refusals being written, each bounded.
package httpguard
