// Package tokenconn is the host's end of a channel that a child connects back to: a listener
// that accepts exactly one connection, the first to present the execution's token as its
// first line, and no other. The container backend serves it on a Unix socket, the jobobject
// backend on a TCP listener on 127.0.0.1; what differs between them (the listener, what is
// done to the connection once accepted, what runs when it ends) comes in as the listener and
// Options hooks, so the accept loop, the token check and the wait live here once.
//
// The token is read byte by byte, so nothing after its line is consumed, within a deadline
// and compared in constant time; at most Options.MaxPending connections present a token at
// once, more are dropped. Once a connection has presented it, the listener is closed and the
// connections still presenting one are dropped.
//
// It imports the standard library only (it builds for every GOOS). A Channel is safe for
// concurrent use: mu guards the connection, the failure, the pending connections and the
// write deadline; hooks that run under it (Options.Accepted) must not call the Channel.
package tokenconn
