// Package engine is the core of mcp-sandbox: the terms of one execution, its limits and
// isolation level, the ten guarantees and their grades, the Outcome, the Sandbox interface
// (Run + Describe) and the Runner that drives any local backend through the host⇄child
// protocol of package wire.
//
// It imports failure, outputs, engine/wire and engine/bootstrap (leaves only). It never imports
// the go-sdk, upstream, binding, mcpserver or a backend: a program's tool calls reach the host
// through ToolCaller, an interface defined here and satisfied by package binding without
// importing engine (both speak wire.Answer), so there is no path from a program to a tool
// registry that does not go through the host. The program's tool names and their aliases come
// in the Execution, computed by the host once; the engine passes them on.
//
// For the operator, and without importing any of its libraries: an Outcome says how its child
// was had (Outcome.Start: warm or cold), Runner.WarmIdle reads the warm pool's depth, and an
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
// # Warm pools (pool.go)
//
// A child can be started, and report its containment, before its program exists: a Runner
// with a WarmPolicy keeps pools of such children, one per owner (the tenant, Execution.Owner)
// and terms, so a child started for one tenant is never handed to another, nor to other
// terms. Each child runs one program, in the empty workspace it was started with, and its
// hello is graded for the execution that takes it, exactly as a cold child's. A pool keeps
// Min children once it has been used or prewarmed (Prewarm, for each agent a server serves),
// and grows towards Max while executions find it empty or empty it: a take starts the
// replacement at once, while the execution runs. Unused for Idle, it shrinks back to Min.
// Background starts run at most startsAtOnce at a time (one per core), so a burst of refills
// does not slow the executions running meanwhile. A warm child that died waiting is never
// handed out. A warm child is started with LaunchSpec.Ahead: it never waits for a scarce
// resource, and with a run_as range warm children hold at most half its identities, so an
// execution that finds no child ready waits for running executions only. WarmStats reports
// the pools' depth and the hits and misses (WarmIdle, the depth alone, for metrics), and
// Outcome.Start says which executions took a warm child. maxWarmPools
// bounds the pools: the least recently used one that was not prewarmed makes room for a new
// one. Prestart (prestart.go) is the one-shot counterpart, without a pool: it starts one
// child for an owner's next execution, so `mcp-sandbox run` starts its program's child while
// it opens the ledger and records the execution; the Run takes it as a cold child, and nothing
// is sent to it before that Run, after the record.
//
// # A forkserver: measured, not built
//
// A forkserver (an interpreter started once, forking a child per execution that then
// confines itself) was measured against starting children (benchmarks, TestReportForkserver):
// from asking for a child to its hello, its floor (fork, fresh mount/pid/net/ipc/uts
// namespaces, a tmpfs workspace, the identity drop, no_new_privs) took 3.7 ms where the
// namespaces backend took 33.7 ms (median of 60, load average 7-12 on 2 cores), 9.2 times
// faster; a start costs about 22 ms of CPU (two init helper runs, the namespaces, the
// interpreter, the probe), so two cores make at most ~90 children a second, which is what
// bounds back-to-back latency (a warm pool drains at that rate) and throughput. It is not
// built because it cannot keep every guarantee as they are kept now: the zygote would have to
// stay privileged (root, or CAP_SYS_ADMIN over the children's namespaces) for its whole life,
// as a Python process on the host, and every confinement step the init helper takes in Go
// through well-kept libraries (internal/launch: the root built and pivoted into, the cgroup,
// the capability drop, Landlock, the seccomp filters with their foreign-ABI guard, the
// rlimits, the reaper that reads the CPU clock for the limit's verdict) would be rewritten in
// Python over ctypes, beside the helper, which the other paths still need. Today the only
// privileged code is that small helper, which execs the interpreter at once. The warm pool
// takes the start off an execution's path whenever the pool keeps up; it does not raise the
// rate children can be made at.
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
