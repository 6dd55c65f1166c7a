// Package mcpserver is the MCP face of mcp-sandbox: for one agent it builds a go-sdk
// mcp.Server offering run_code (only when the agent opted in to code execution), list_tools,
// get_tool_info and read_tool_output, renders engine results for the model, and serves those
// servers over streamable HTTP to many tenants (HTTPHandler) with bearer tokens (static, or
// OAuth access tokens through HTTPOptions.OAuth, with RFC 9728 metadata), Host and Origin
// protection and a request body limit, and over stdio (ServeStdio: every request read before
// stdin ends is answered, docs/design.md §14.3).
//
// Imports: engine, execution, binding, approval (its questions, of which this package is only
// how one crosses MCP, by elicitation or input_required), upstream, budget, outputs, failure,
// telemetry, cassette (a paused program's journal), programs (saved programs, offered here as
// tools) and the go-sdk only (docs/design.md §2).
// It never imports configs: cmd converts the config into the small types here (Agent,
// CodeExec, Upstreams, HTTPOptions), hashes tokens and hands over a func(token) (tenant, ok).
//
// The decisions (refusals as results, progress, cancellation, HTTP routing, the two
// revisions, Runs, quotas, exposure, approvals, telemetry): docs/design.md §14.
//
// Goroutines: each session's Run-end watcher is counted by its server and, with a Drain, ended
// and waited for by Drain.Close (which the caller runs after Drain.Wait and before closing the
// ledger); progress senders are waited for by their run_code; a Drain's cancellation of an
// execution is a context.AfterFunc, unhooked when the execution ends; a call held for an
// approval's round trips (mrtr.go) runs on a goroutine begun with the Drain like an execution
// and ends with its call (at the latest when the approval times out), and so does the relay
// of what it comes to after an answer given on another path (retry.go); ServeStdio's wait for
// its session is its own, ended before it returns. A task's program runs on a goroutine begun
// with the Drain like an execution (runTask), and its status writer on one runTask stops and
// waits for once the program has stopped (execution.Program.Ran). TestMain checks that no
// goroutine outlives the tests.
//
// Concurrency: a Server built by NewServer serves any number of sessions and calls at once;
// everything it holds after construction is read-only except the exposed tool set and the
// saved programs offered, guarded by handlers.exposedMu and savedMu (each taken before go-sdk's
// own server lock, never inside it). A Quotas' mu is
// likewise taken before a go-sdk server's lock (it asks Sessions) and never held while a
// program waits for a slot. The tasks this process runs are guarded by runningTasks.mu; what a
// running task's program and its status writer share (the question asked, the execution id,
// the output Capture, the bindings) are atomics, and the rest is the status writer's until it
// has stopped. HTTPHandler is safe for concurrent use.
package mcpserver
