// Package claudecode drives Claude Code (npm @anthropic-ai/claude-code, pinned in
// conformance/package.json) as a real MCP host for tests and benchmarks, with its model
// replaced by Model: a scripted Messages API that answers /v1/messages with scripted turns,
// streamed as server-sent events as the real API streams them, and records every request, so
// a test reads exactly the tool listing and the tool_result blocks Claude Code sends its
// model. Claude Code sends nothing off loopback, by construction: Run starts the scripted API,
// claude and the MCP servers claude spawns in a network namespace of their own with only
// loopback up (a thread's unshare, root only; a test that cannot make one skips or fails
// through internal/gate, capability "netns"), with HOME a temporary directory, a dummy API
// key, and the updater, telemetry and nonessential traffic turned off.
//
// It imports the standard library, golang.org/x/sys, internal/gate and internal/launch (lo set
// up as the sandboxes' namespaces set it); only tests may import
// it (meta_test.go). A Model is safe for concurrent use (Claude Code may send requests in
// parallel); Run waits for claude and every goroutine it starts.
package claudecode
