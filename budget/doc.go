// Package budget meters what a program's tool calls cost the host, and defines the durable run
// ledger those meters are counted from (Ledger; its implementations are budget/sqlite and
// budget/postgres).
//
// The meters, admission, the bounded records of refusals, the ledger's records, owners and
// recovery, and the two ledgers: docs/design.md §6. Ledger is one contract, required whole:
// beside Runs and calls it keeps paused calls (Pauses, docs/design.md §11), recorded
// executions' cassettes as bytes (Cassettes, docs/design.md §17) and the shapes observed of
// tools' results, merged across replicas (ObservedShapes, docs/design.md §3.3), and reads an
// execution's record back, what its egress proxy decided included (Network, docs/design.md
// §18).
//
// # Imports and concurrency
//
// It imports failure, telemetry (the one type of the context economy the ledger keeps) and
// the standard library. Meter and Ticket are safe for concurrent use, as every
// Ledger must be. Lock order: a Meter's mu is never held while the ledger is called.
package budget
