// Package remote is the remote sandbox: a small HTTP protocol, the client that makes a
// sandbox service look like any other engine.Sandbox (the `remote` backend), and the Service
// that `mcp-sandbox sandbox-service` serves, which runs each execution on its own local
// engine.Runner. Execution capacity can so live on other machines than the MCP server, and
// scale as a pool of services.
//
// The protocol (four routes, the NDJSON frame stream), who decides what, failures, bounds
// and credentials: docs/design.md §7.
//
// It imports engine, engine/wire (its strict decoder), failure, outputs (a binding call's Reply) and the standard library. A
// Sandbox and a Service are safe for concurrent use; each Run owns its goroutines (the
// stream reader, its calls, its cancel) and waits for them before it returns, and a Service's
// start handler owns its heartbeat and returns only once the program's Run has.
package remote
