// Package remote is the remote sandbox: a small HTTP protocol and the client that makes a
// sandbox service look like any other engine.Sandbox (the `remote` backend). The service that
// `mcp-sandbox sandbox-service` serves, which runs each execution on its own local
// engine.Runner, is package remote/service. Execution capacity can so live on other machines
// than the MCP server, and scale as a pool of services.
//
// The protocol (four routes, the NDJSON frame stream), who decides what, failures, bounds
// and credentials: docs/design.md §7.
//
// It imports engine, engine/wire (its frames and strict decoder), toolcall (the answers they
// carry), outputs (the previews it makes from the bytes received), failure and the standard
// library. A Sandbox is safe for concurrent use; each Run owns its goroutines (the stream
// reader, its calls, its cancel) and waits for them before it returns.
package remote
