// Package postgres is the run ledger for replicas on several machines: a budget.Ledger on
// PostgreSQL (pgx), every replica opening the same database. Admission is one statement
// whose conditional UPDATE of the Run's row checks every meter; a queued tool_call_finished
// rides in the same pgx batch as the next admission (pipeline.go). Each open Ledger is an
// owner holding a lease row it renews; Recover settles the calls of an owner whose lease ran
// out. It passes the contract in budget/ledgertest; budget's package doc says how meters stay
// exact across replicas.
//
// It imports budget, budget/internal/lazy, failure, telemetry (the context economy it keeps),
// internal/pgdb, pgx and the standard library. A Ledger is safe for concurrent use; it owns
// two goroutines, the lease renewal and the flusher of queued records, which Close stops and
// waits for.
package postgres
