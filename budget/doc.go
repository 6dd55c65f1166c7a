// Package budget meters what a program's tool calls cost the host, and keeps the durable run
// ledger those meters are counted from.
//
// # The five meters
//
// Calls; transfer (bytes that crossed into the sandbox); produced (bytes upstream tools made,
// delivered or not); preserved (bytes held in the ledger or the blob store); and the per-call
// ceilings on arguments (MaxArgumentBytes) and results (MaxResultBytes). Each applies per
// execution and per Run. Limits come from the profile's binding_budget narrowed by the tenant
// policy (Limits.Narrow only narrows); an agent's config does not carry them. A zero field is
// "not set by this layer": no ceiling from it. A profile always sets them (configs' default does).
//
// # Admission
//
// Meter.Admit reserves a call against the execution in memory (a mutex, so the execution half
// is exact), then asks the Ledger to write tool_call_started, which it does only if the Run is
// still within its limits, in one write transaction. That write is the commit: from then on the
// call is spent, whatever follows. With N calls racing against max_calls K exactly K are
// admitted, per execution and per Run, across goroutines and, for the SQLite ledger, across
// processes sharing the file. A refusal (budget_exceeded, argument_too_large) is recorded as a
// refused call that was never spent.
//
// The byte meters are checked before a call (a meter already at its ceiling refuses the next
// call) and charged after it (Ticket.Finish, Meter.Charge): bytes are only known once the
// upstream has answered. A single call's transfer is bounded by Ticket.TransferAllowance, so
// the overshoot of a byte meter is at most what concurrently admitted calls deliver.
//
// # The run ledger
//
// Ledger records run start/end, execution start/end, tool_call_started (before the upstream is
// called) and tool_call_finished (succeeded | failed | refused | aborted, with attachments as
// JSON). The per-Run half of every meter is read from the ledger (RunUsage), so a restarted
// process does not hand a Run a fresh allowance. On startup Recover marks every started call
// without an end, whose owner process is gone, as unknown: counted, never replayed.
// Direct (non-program) tool calls are recorded with an empty execution id; they do not count
// against the Run's binding budget, which meters programs.
//
// OpenSQLite is the single-machine ledger (modernc.org/sqlite, pure Go, WAL, busy timeout);
// a PostgreSQL ledger will implement the same interface and pass the same contract suite
// (RunLedgerContract in ledger_contract_test.go; it lives in this package's tests so the
// PostgreSQL implementation, which DESIGN.md §2 places in this package, can call it).
//
// # Imports and concurrency
//
// It imports failure, the standard library and modernc.org/sqlite (and later a PostgreSQL
// driver). Meter, Ticket and the SQLite ledger are safe for concurrent use. Lock order: a
// Meter's mu is never held while the ledger is called.
package budget
