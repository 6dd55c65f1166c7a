// Package sqlite is the single-machine run ledger: a budget.Ledger in one SQLite file (pure Go,
// WAL), shared by the goroutines of a process and by the processes of one host. Writes are
// committed in batches (batch.go); admission is one conditional UPDATE of the Run's row. Each
// open Ledger holds an internal/owner.Lock beside the file, so Recover settles the calls of an
// opener only once it is closed or dead. It passes the contract in budget/ledgertest.
//
// It imports budget, budget/internal/lazy, failure, telemetry (the context economy it keeps),
// internal/owner, modernc.org/sqlite and the standard library. A Ledger is safe for concurrent use; it owns two goroutines, the flusher of
// queued writes and the checkpointer of the WAL (checkpoint.go), which Close stops and waits
// for.
package sqlite
