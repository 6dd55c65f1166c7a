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
// Output at a kill. A program's stdout is a pipe, so CPython buffers it in blocks of 8 KiB:
// what it printed before a kill may still be in the interpreter when the kill comes. A flush
// per line would keep it, but costs a system call per line (a 100 MiB print takes about six
// times as long; `make bench` shows it), so the buffering stays and each kill that can be
// seen coming asks for a flush first:
//   - wall clock and cancellation (the host's own decisions): the host shuts down its half of
//     the channel; the bootstrap, which armed the channel with O_ASYNC, gets SIGIO, flushes
//     sys.stdout and sys.stderr (and the original streams, if the program replaced them) and
//     exits. The host waits up to FlushGrace for that exit, then kills the tree. A host that
//     dies closes the channel, which ends a running program the same way (a container the
//     host's death does not reach, say).
//   - cpu: RLIMIT_CPU's soft limit is cpu_seconds and its hard limit CPUGraceSeconds more; at
//     SIGXCPU the bootstrap flushes and ends the interpreter with SIGXCPU. A program that
//     ignores SIGXCPU runs into the hard limit's SIGKILL.
//   - memory: RLIMIT_AS makes an over-large allocation an ordinary MemoryError, and the
//     bootstrap flushes as for any other ending.
//
// What is still lost: a cgroup OOM kill gives no warning (it strikes only when the tree's
// processes together pass memory_bytes, since RLIMIT_AS stops any one interpreter first); a
// program that replaces or ignores SIGIO or SIGXCPU, closes the channel, or whose main thread
// is inside C code that never returns to the interpreter (the signal handler cannot run) loses
// its unflushed buffer, and ends FlushGrace later; a file object the program opened itself
// and did not make sys.stdout is not known to the bootstrap. os.write(1, …) is never buffered.
//
// A Runner is safe for concurrent use; each Run owns its child, its goroutines (the frame
// reader and the exit waiter started with the child, one per binding call in flight) and its
// workspace, and returns only after all of them are gone; Close waits for the warm-child
// refills and the probe listeners' accept loops. TestMain checks that no goroutine outlives
// the tests. The protocol loop is tested without Python by golden transcripts
// (testdata/sessions, session_test.go) replayed by a fake child.
package engine
