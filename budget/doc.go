// Package budget meters what a program's tool calls cost the host, and keeps the durable run
// ledger those meters are counted from.
//
// The meters, admission, the bounded records of refusals, the ledger's records, owners and
// recovery, and the two ledgers: docs/design.md §6.
//
// # Imports and concurrency
//
// It imports failure, internal/pgdb, the standard library, modernc.org/sqlite and pgx. Meter,
// Ticket and both ledgers are safe for concurrent use. Lock order: a Meter's mu is never held
// while the ledger is called. A SQLite ledger owns one goroutine (the flusher of queued
// writes), a Postgres ledger one (lease renewal); Close stops it and waits for it.
package budget
