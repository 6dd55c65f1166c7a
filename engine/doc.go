// Package engine is the core of mcp-sandbox: the terms of one execution, its limits and
// isolation level, the ten guarantees and their grades, the Result, the Sandbox interface
// (Run + Describe) and the Runner that drives any local backend through the host⇄child
// protocol of package wire.
//
// It imports failure, outputs, engine/wire and engine/bootstrap (leaves only). It never imports
// the go-sdk, upstream, binding, mcpserver or a backend: a program's tool calls reach the host
// through ToolCaller, an interface defined here and satisfied by package binding without
// importing engine (both speak outputs.Reply), so there is no path from a program to a tool
// registry that does not go through the host. The program's tool names and their aliases come
// in the Execution, computed by the host once; the engine passes them on.
//
// For the operator, and without importing any of its libraries: a Result says how its child
// was had (Result.Start: warm or cold), Runner.WarmIdle reads the warm pool's depth, and an
// Execution may carry its logger (Execution.Logger) for a backend that logs about it.
//
// A Runner is safe for concurrent use; each Run owns its child, its goroutines (the frame
// reader and the exit waiter started with the child, one per binding call in flight) and its
// workspace, and returns only after all of them are gone; Close waits for the warm-child
// refills and the probe listeners' accept loops. TestMain checks that no goroutine outlives
// the tests. The protocol loop is tested without Python by golden transcripts
// (testdata/sessions, session_test.go) replayed by a fake child.
package engine
