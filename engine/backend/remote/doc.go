// Package remote is the remote sandbox: a small HTTP protocol and the client that makes a
// sandbox service look like any other engine.Sandbox (the `remote` backend). The service
// that `mcp-sandbox sandbox-service` serves, which runs each execution on its own local
// engine.Runner, is package remote/service. Execution capacity can so live on other machines
// than the MCP server, and scale as a pool of services.
//
// # Protocol, version 2
//
// Four routes under the service's base URL, each authenticated with
// "Authorization: Bearer <token>" when the service has tokens:
//
//	GET  /v2/describe                  200 application/json DescribeAnswer
//	POST /v2/executions                StartRequest → 200 application/x-ndjson frame stream
//	POST /v2/executions/{id}/results   wire.Result → 204
//	POST /v2/executions/{id}/cancel    {} → 204, once the program's tree is gone (bounded)
//
// and, unauthenticated, GET /healthz (200 while the process lives) and GET /readyz (200 while
// the local sandbox is ready and the service is not draining). Every other answer is an
// ErrorBody, {"error": {"kind", "message"}}: 400 malformed, 401 no valid token, 404 no such
// execution (or another token's), 409 no call with that id is waiting, 413 too large,
// 503 busy or draining.
//
// The version is the /v2 of the path and the "protocol" field of a DescribeAnswer and a
// StartRequest. Anything that changes a route, a frame or the Outcome's JSON shape is a new
// version: frames and bodies are decoded strictly (exact-case keys, an unknown or repeated
// key is an error), so a client and a service must agree on the shape.
//
// A stream is newline-delimited JSON, one frame a line, service to client:
//
//	stream = error | accepted { progress | call | read } { data } result
//
//	{"type":"error","kind":K,"message":M}           the service will not run it; nothing ran.
//	                                                K is isolation_unavailable, network_unavailable
//	                                                or backend_unavailable for terms it cannot meet.
//	{"type":"accepted","execution":ID}              ID names the execution in its two routes.
//	{"type":"progress","elapsed_seconds":S}         the heartbeat, about once a second.
//	{"type":"call","id":N,"tool":T,"args":{…}}      the program calls T: run it, post a result.
//	{"type":"read","id":N,"handle":H,"offset":O,"limit":L,"pattern":P}
//	                                                the program reads a window of its handle H.
//	{"type":"data","stream":S,"data":B64}           captured bytes, after the program ended: S is
//	                                                stdout, stderr or artifact:I (the I-th listed
//	                                                artifact, at least one frame each). Written in
//	                                                exactly this form, so it decodes in place.
//	{"type":"result","execution":ID,"outcome":O}    O is the engine.Outcome JSON: the result
//	                                                document (DESIGN.md §3.4) less what the
//	                                                caller adds; the stream ends.
//
// The call and read frames, and the result posted for each, are package wire's, as between
// the host and a child: one frame set on both boundaries. Call and read ids increase
// strictly within a stream; calls overlap, and a result
// ({"type":"result","id","ok","value"|"handle"|"kind"+"message"}) may come in any order. Binding calls travel
// back to the caller, which runs them through its own policy, budgets and ledger (its
// engine.ToolCaller): a service holds no upstream credential and reaches no tool.
//
// # Refusing before running
//
// The client reads describe first (cached DescribeTTL) and sends nothing the service says it
// cannot run: a service not ready is backend_unavailable, one below the profile's isolation
// isolation_unavailable, network it does not allow network_unavailable. The service checks
// again and answers an error frame, before anything runs, when asked for terms it cannot
// meet. Terms narrow on both sides and never widen: the client narrows by its profile's hard
// limits and the service's limit_ceiling; the service's Runner narrows by its own.
//
// # Which side decides what
//
// The caller's profile decides what it asks and what it accepts: hard limits and network
// (narrowing the request), the least isolation, how much of each output stream and of the
// artifacts it keeps, and the binding budget its own meters count. The service's profile
// decides how a program runs: the backend and its mechanisms, identity, interpreter,
// environment allowlist, its own hard limits (narrowing again), the previews the model sees
// (output.preview_bytes) and warm children.
//
// # Failures are deterministic, and nothing is re-run by accident
//
// An answer other than 200 (redirects included: none is ever followed), a 200 that is not an
// NDJSON stream, a stream that ends before its result, a malformed frame, a stream past a
// bound, a result for another execution, and a result that claims more than was asked (an
// isolation below the terms, wider terms, bytes it did not send) are provider_error; such a
// result is withheld whole. The client's wall clock (the terms' wall_seconds plus Slack) and a
// caller's cancellation post a cancel and report timeout or cancelled, keeping the output the
// service's last result carries when it arrives within CancelGrace; before the stream is
// accepted there is no id to cancel, and closing the request ends it (a service cancels an
// execution whose caller went away). Only describe retries;
// an execution is never retried, and neither is a reply or a cancel.
//
// # Bounds
//
// The client bounds a stream as its bytes arrive (Bounds): one frame, the whole stream, the
// number of lines and the number of empty lines each have a ceiling, checked before a line
// is assembled, and the reader hands the processor back every few hundred lines so the
// timers that end a hostile stream keep running. Kept output is bounded by the profile's
// output.max_bytes per stream and artifacts.max_bytes (the rest is counted and dropped);
// IdleTimeout ends a stream silent even of heartbeats. The service bounds request bodies
// (MaxRequestBytes, and 30 s to arrive, before an execution slot is taken), executions at
// once (MaxExecutions) and each frame's write (WriteTimeout).
//
// # Credentials
//
// The client resolves its credential fresh for every request (Options.Bearer) and puts it in
// the Authorization header only: never in a URL, a log line, an error or a result. A
// credential over plaintext http:// is refused unless the host is loopback or
// AllowInsecureHTTP is set; no proxy from the environment is used. The service compares
// tokens by their SHA-256, as the MCP listener does (cmd holds the table). An execution's
// routes need a valid token and the execution's id, 128 random bits sent only on its own
// stream; the service also binds each execution to the principal Authenticate names, so a
// deployment that gives callers different principals keeps them apart (404). cmd names one
// principal for all tokens, so a credential rotated during an execution still answers it.
//
// # A pool of services
//
// An execution's results and cancel must reach the service that holds its stream: behind a
// load balancer, route /v2/executions/{id}/… by the id (or address each service directly).
//
// It imports engine, engine/wire (its frames and strict decoder), failure and the standard
// library. A Sandbox is safe for concurrent use; each Run owns its goroutines (the stream
// reader, its calls, its cancel) and waits for them before it returns.
package remote
