// Package benchmarks measures, and never asserts, how fast mcp-sandbox is beside a baseline
// measured in the same run: these machines are noisy, so every figure is printed next to its
// baseline as a ratio. `make bench` runs the TestReport* tests with -bench-report; a plain
// `go test` runs them with a few samples only, to keep the harness from rotting. The run
// ledger's figures (TestReportLedger, TestReportLedgerBindings) put PostgreSQL beside SQLite;
// they need the database the tests use (MCP_SANDBOX_TEST_PG_DSN, internal/pgdb/pgtest).
package benchmarks
