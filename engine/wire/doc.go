// Package wire is the host⇄child protocol: newline-delimited JSON frames, each with a "type",
// on a socket the child inherits as fd 3 (or a Unix socket, after a per-execution token, for
// containers).
//
//	child                                   host
//	  │── hello {version, token?, probe} ──────▶│  grade the probe against the terms
//	  │◀───────────── run {program, tools, aliases} (or abort {kind, reason}, then nothing)
//	  │── call {id, tool, args} ───────────────▶│  through the ToolCaller: policy, budget, record
//	  │── read {id, handle, offset, limit, pattern}▶│
//	  │◀──────────────── result {id, ok, value | handle | kind+message}
//	  │── done {ok, value | error} ─────────────▶│
//
// Calls may overlap: results come back in any order and are matched by id. The child speaks
// first and the host never sends a program before it has graded the hello.
//
// Every frame the host reads is bounded before it is decoded (Reader), keys are exact-case,
// unknown or duplicated keys are rejected, and a frame type the direction does not allow is an
// error: a child that breaks any of this ends its execution with protocol_violation.
//
// It imports the standard library only (DESIGN.md §2 also allows failure). A Reader or Writer belongs to one goroutine at a
// time; Writer serializes concurrent Write calls.
package wire
