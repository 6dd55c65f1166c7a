// Package wire is the host⇄child protocol: newline-delimited JSON frames, each with a "type",
// on a socket the child inherits as fd 3, or, for containers, on a Unix socket the host
// listens on (socket mode).
//
//	child                                   host
//	  │── <token>\n ───────────────────────────▶│  socket mode only: checked before any frame
//	  │── hello {version, probe} ──────────────▶│  grade the probe against the terms
//	  │◀───────────── run {program, tools, aliases} (or abort {kind, reason}, then nothing)
//	  │── call {id, tool, args} ───────────────▶│  through the ToolCaller: policy, budget, record
//	  │── read {id, handle, offset, limit, pattern}▶│
//	  │◀──────────────── result {id, ok, value | handle | kind+message}
//	  │── done {ok, value | error} ─────────────▶│
//
// Calls may overlap: results come back in any order and are matched by id. The child speaks
// first and the host never sends a program before it has graded the hello.
//
// Socket mode: the host mints a token per execution (64 lowercase hex digits) and hands it to
// the child out of band (on the container's stdin). The first line on a connection must be
// exactly the token and a newline, read byte by byte with a deadline and compared in constant
// time, before any frame is decoded; a connection that sends anything else is dropped, and
// once one has presented the token the listener is closed, so a second connection is
// refused. After that line the connection carries frames exactly as fd 3 does. The token is a
// line of its own rather than a field of hello, so that no JSON from an unauthenticated peer is
// ever parsed and the protocol above it is the same for every backend.
//
// Every frame the host reads is bounded before it is decoded (Reader), keys are exact-case,
// unknown or duplicated keys are rejected, and a frame type the direction does not allow is an
// error: a child that breaks any of this ends its execution with protocol_violation.
//
// It imports toolcall (a result frame carries its Answer) and the standard library (docs/design.md §2). A Reader
// or Writer belongs to one goroutine at a time; Writer serializes concurrent Write calls.
package wire
