// Package pgdb is what the PostgreSQL stores (the run ledger in budget, the blob store in
// outputs/pgblob) share: opening a connection pool from a DSN with errors that never carry
// the DSN or its password, and versioned migrations that replicas starting together apply
// exactly once.
//
// # Migrations
//
// A component (the ledger, the blob store) has an ordered list of steps; step i is schema
// version i+1. Migrate runs the steps not yet recorded in mcp_sandbox_migrations, each
// recorded in the same transaction as its DDL (PostgreSQL's DDL is transactional), under
// pg_advisory_xact_lock on a key derived from the current schema: a second replica starting
// at the same moment waits for the lock, then finds the steps recorded and applies none. The
// lock is transaction-scoped, so it is released however the transaction ends, including when
// the connection dies. Steps are only ever appended and are additive (new tables, new
// columns with defaults), so a schema newer than a binary knows is still one it can use: an
// older replica in a rolling upgrade keeps working.
//
// The stores live in whatever schema the DSN's search_path names (default: the user's
// search_path, usually public); the tests give each test a schema of its own that way.
//
// # Imports and concurrency
//
// It imports the standard library and pgx. Its functions are safe for concurrent use; a
// pgxpool.Pool is.
package pgdb
