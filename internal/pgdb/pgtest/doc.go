// Package pgtest gives a test a PostgreSQL schema of its own. The database comes from
// MCP_SANDBOX_TEST_PG_DSN (`.ci/run` creates it and sets the variable); without it, or when
// the server does not answer, the test is gated on capability "postgres" (internal/gate):
// skipped with the reason on a developer's machine, failed in CI.
//
// It imports the standard library, internal/gate and pgx, and is for tests only. Schema is
// safe for concurrent use.
package pgtest
