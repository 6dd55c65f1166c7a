// Package service is the sandbox service, the server half of the remote protocol (package
// remote holds the protocol's routes and frames, and the client): `mcp-sandbox
// sandbox-service` serves a Service, which runs each execution on its own local
// engine.Runner (LocalSandbox) and sends the program's binding calls back to the caller as
// wire.Call and wire.Read frames (forward.go): it holds no upstream credential and reaches no
// tool. It checks the terms before anything runs, bounds request bodies (MaxRequestBytes),
// executions at once (MaxExecutions) and each frame's write (WriteTimeout), and drains
// (Drain) on shutdown. The protocol itself is in package remote's doc.
//
// It imports engine, engine/wire, toolcall, engine/backend/remote (the protocol), failure and
// the standard library. A Service is safe for concurrent use; its start handler owns its
// heartbeat and returns only once the program's Run has, and Drain waits for the running
// ones (bounded).
package service
