// Package engine is the core of mcp-sandbox: the terms of one execution, its limits and
// isolation level, the ten guarantees and their grades, the Outcome, the Sandbox interface
// (Run + Describe) and the Runner that drives any local backend through the host⇄child
// protocol of package wire.
//
// It imports failure, outputs, engine/wire, engine/bootstrap, toolcall and egress (leaves only). It never imports
// the go-sdk, upstream, binding, mcpserver or a backend: a program's tool calls reach the host
// through ToolCaller, an interface defined here and satisfied by package binding without
// importing engine (both speak toolcall.Answer), so there is no path from a program to a tool
// registry that does not go through the host. The program's tool names and their aliases come
// in the Execution, computed by the host once; the engine passes them on.
//
// Output at a kill, warm pools and the namespaces backend's template (a warm child forked,
// not exec'd; the result's start block): docs/design.md §4.2-§4.4.
//
// # Concurrency
//
// A Runner is safe for concurrent use; each Run owns its child, its goroutines (the frame
// reader and the exit waiter started with the child, and its call workers: at most one per
// binding call in flight, each kept for the execution's next call, so sequential calls reuse
// one goroutine and its grown stack) and its workspace. Run returns once its Outcome is final: when the program completed and its output
// streams have ended (the bootstrap lets go of them before done, so no byte can still be
// coming), the child's end (kill, reap, cgroup and workspace removal) finishes on a goroutine
// the Runner owns; otherwise (a failure, a kill, a daemon still holding the streams) Run
// returns only after all of it. Close waits for those ends, for the warm children's starts
// and discards, and for the probe listeners' accept loops. TestMain checks that no goroutine
// outlives the tests. The protocol loop is tested without Python by golden transcripts
// (testdata/sessions, session_test.go) replayed by a fake child, and the pools by fake
// children too (pool_test.go).
package engine
