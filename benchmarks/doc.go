// Package benchmarks measures, and never asserts, how fast mcp-sandbox is beside a baseline
// measured in the same run: these machines are noisy, so every figure is printed next to its
// baseline as a ratio, with the load average at the time. `make bench` runs the TestReport*
// tests with -bench-report; a plain `go test` runs them with a few samples only, to keep the
// harness from rotting.
//
//   - TestReport: one execution's latency per backend, cold and with a warm child, beside a
//     bare interpreter start.
//   - TestReportStdioLatency: back-to-back run_code of 6*7 over stdio, end to end.
//   - TestReportHTTPThroughput: executions per second with eight clients over HTTP, beside
//     the rate the same cores start a bare interpreter back to back.
//
// Both print the CPU time one execution costs the server itself and its sandbox children,
// read from /proc (processCPU): where an execution's CPU goes, whatever else loads the machine;
// the stdio one sets it, and its latencies, beside a bare start's CPU and wall as ratios.
// Both run twice, with warm.start auto (warm children forked from templates where the host
// allows it) and exec, and count how the children were made (the result's start block).
//
//   - TestReportRunColdStart: `mcp-sandbox run` of pass beside `python3 -I -c pass`, in turn,
//     with the binary's own start (`--version`), the init helper's, and a Go program that
//     only exits (the floor of any Go binary).
//   - TestReportBindings: 1,000 sequential binding calls beside a Go client's direct calls;
//     TestReportBindingsConcurrent: eight programs calling at once beside eight direct clients.
//   - TestReportHostCost: the server's memory per concurrent execution, and while a program
//     prints 1 GiB.
//   - TestReportForkserver: a forkserver's floor beside the namespaces backend's start (the
//     verdict is in docs/design.md §4.4).
//   - TestReportContext: what a model reads doing three tasks with direct tool calls and with
//     one run_code, in bytes and tokens (bytes/4), counted alike on both sides (C per task and
//     with its tools taught once a session), and the fixed cost of listing run_code and the
//     built-ins.
//   - TestReportContextClaudeCode: the same three tasks through Claude Code as the host (its
//     model a scripted Messages API, internal/claudecode): what it hands its model, directly
//     and with run_code. Under -bench-report only (seven Claude Code sessions).
//   - TestReportLedger, TestReportLedgerBindings: the run ledger on PostgreSQL beside SQLite;
//     they need the database the tests use (MCP_SANDBOX_TEST_PG_DSN, internal/pgdb/pgtest).
//
// TestSoak is a test, not a report: it runs executions (-soak-executions; `make soak` runs
// 10,000, CI a few hundred) and fails when file descriptors, goroutines, temporary
// directories, cgroups or mounts are not where they started.
package benchmarks
