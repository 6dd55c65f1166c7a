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
// admitted, per execution and per Run, across goroutines and across processes sharing the
// ledger (the SQLite file, or the PostgreSQL database of several replicas). A refusal
// (budget_exceeded, argument_too_large) is recorded as a refused call that was never spent,
// within the bound below.
//
// The byte meters are checked before a call (a meter already at its ceiling refuses the next
// call) and charged after it (Ticket.Finish, Meter.Charge): bytes are only known once the
// upstream has answered. A single call's transfer is bounded by Ticket.TransferAllowance, so
// the overshoot of a byte meter is at most what concurrently admitted calls deliver.
//
// # Refusals are counted, and their records bounded
//
// A refused call costs a program nothing, so a hostile one can loop on it; a record per
// refusal would grow the ledger without limit. So an execution's Meter counts its refusals
// per tool and kind (argument_too_large, budget_exceeded; an unasked approval per tool and
// reason) in memory, records the first RecordedRefusals (8) of each one by one as before, and
// at the execution's end (Meter.End, before the execution's end record) writes one summary
// per tool and kind holding how many more there were: a refused call record (or an unasked
// approval record) whose Times is that number, whose message says so, and whose
// argument_bytes is the largest among them. Every other record has Times 1 (the column's
// default, so records of older versions read right). The refusals of a kind number exactly
// the sum of Times over its records:
//
//	SELECT tool, kind, sum(times) FROM tool_calls WHERE status = 'refused' GROUP BY tool, kind
//
// An execution thus writes at most 9 refusal records per tool and kind, however long its
// program loops; the tools are those its tenant grants. A Meter that has seen the Run spent
// refuses without asking the ledger (a Run's usage only grows); a few calls racing into the
// ledger before it has seen it are each recorded by StartCall, and counted among the first.
// Refusals spend nothing, so no meter changes. A direct Meter (no execution, no end to
// summarise at) records every refusal. If the host dies before an execution's end, its
// summaries are lost with it: the execution then has no end record, which says its counts
// are incomplete.
//
// # The run ledger
//
// Ledger records run start/end, execution start/end (with the execution's context economy,
// which RunContext sums per Run), tool_call_started (before the upstream is
// called) and tool_call_finished (succeeded | failed | refused | aborted, with attachments as
// JSON). The per-Run half of every meter is read from the ledger (RunUsage), so a restarted
// process does not hand a Run a fresh allowance. Direct (non-program) tool calls are recorded
// with an empty execution id; they do not count against the Run's binding budget, which
// meters programs.
//
// # Approvals
//
// A call that needs a person's approval (package binding asks) is recorded before anyone is
// asked (AskApproval: pending, owned like a call) and when the answer comes (DecideApproval:
// accepted, declined, cancelled, timed_out or failed, with who answered when the host says), or
// at once as unasked when the host cannot ask. An approval spends nothing: an accepted call is
// then admitted and recorded like any other, under the call id its approval named (Call.ID),
// and a refused one never reaches StartCall. A pending approval whose owner is gone is recorded
// unknown by Recover, and DecideApproval then refuses to accept it (ErrAlreadyFinished), so a
// call whose approval outlived its host is never made.
//
// # Owners, leases and recovery
//
// Each open ledger is an owner; the calls it starts carry its id. An owner is alive while it
// holds its liveness token: for SQLite an exclusive flock on a file named for it (the kernel
// drops it when the process dies, however it dies), for PostgreSQL a lease row it renews every
// LeaseTTL/3. Recover marks every started call of a gone owner (closed, killed, or, for
// PostgreSQL, silent past its lease) as unknown: counted, never replayed. RunRecovery runs it
// at startup and then periodically, so a survivor records a dead replica's calls while both
// would otherwise run on; concurrent recoveries record (and report) each call once.
//
// A PostgreSQL owner that stalls past its lease (a long pause, a partition) may find that a
// survivor has recorded its in-flight calls unknown: their FinishCall then returns
// ErrAlreadyFinished (the unknown record stands, the call stays counted), Ticket.Finish charges
// the bytes that arrived to the Run and the execution all the same (Charge), and the owner
// takes a new lease. Meter.CallsSurelyOpen says when that cannot have happened (no lease, or
// one renewed recently enough by this process's clock: Postgres.LeaseHeldUntil); when it may
// have, package binding writes tool_call_finished before it hands a result over, and withholds
// the result of a call found recorded unknown. A call is never started under a lease that has run out: StartCall holds a
// key-share lock on the owner's live lease row in the same statement that writes the call,
// and Recover deletes an expired lease (waiting for those locks) before, in a later statement
// of its transaction, it marks that owner's calls. Lease times are the database's clock, so
// the replicas' clocks do not matter.
//
// # SQLite and PostgreSQL
//
// OpenSQLite is the single-machine ledger (modernc.org/sqlite, pure Go, WAL, busy timeout),
// private to its owner: the data dir 0700, the ledger file created 0600 before SQLite opens it
// (its -wal and -shm take the same mode), and looser ones an older version left tightened.
// OpenPostgres (pgx v5, a pool) is the ledger for replicas on several machines. Both pass
// RunLedgerContract (ledger_contract_test.go, in this package's tests because both
// implementations live here).
//
// Per-Run meters stay exact across replicas through transactions and row locks, not advisory
// locks: admitting a metered call is one statement whose conditional UPDATE of the Run's row
// checks every meter and counts the call (UPDATE … WHERE calls < max … RETURNING), with the
// call and its execution's count written in the same statement. The Run's row lock makes
// racing admissions, from any replica, take turns, and under READ COMMITTED each re-checks
// the row as the previous one committed it; so exactly max_calls are admitted, in one round
// trip each. A row lock covers exactly the Run (an advisory lock would be a key hashed from
// the Run, shared with whatever else hashed the same), ends with its transaction however the
// connection ends, and needs no retry loop (SERIALIZABLE would abort most of a burst of
// racing calls). Statements take row locks in one order (call, Run, execution); a deadlock or
// serialization failure, should one occur anyway, is retried. The schema is versioned
// (internal/pgdb) and migrated on open under an advisory transaction lock, so replicas
// starting together apply each step once.
//
// A binding call is two records (started, then finished), and on both ledgers the finished
// record rides with the next call's started one: a program's sequential calls cost one
// commit each, and the started record is still committed before its upstream is touched. The
// SQLite ledger commits writes in batches (batch.go): writes that arrive while one commits
// share the next transaction, run as one (only when one of them fails does the batch run
// again, each in a savepoint of its own), and tool_call_finished
// (Ticket.FinishLater) waits for the next batch; admission is one conditional UPDATE of the
// Run's row, as on PostgreSQL. The PostgreSQL ledger sends a queued tool_call_finished in the
// same pgx batch (one round trip, one implicit transaction) as the next metered admission
// (pgbatch.go). What finds nothing to ride with goes after a couple of milliseconds, or at a
// Flush (binding's Execution.Wait), and reads flush first.
//
// SQLite in WAL mode with synchronous=NORMAL does not wait for the disk at a commit;
// PostgreSQL by default does. On the loaded 2-core test machine (benchmarks:
// TestReportLedger) a call's two records cost about 0.23 ms on SQLite, 0.52 ms on PostgreSQL
// and 0.30 ms with synchronous_commit=off; through a whole binding call
// (TestReportLedgerBindings), PostgreSQL is 1.45 times SQLite. There the statements, not the
// commits, are most of PostgreSQL's cost: the pipelining changed little on loopback, and saves
// a round trip a call where the database is across a network. synchronous_commit=off, a DSN
// parameter, gives PostgreSQL SQLite's durability here: a crash of the database machine may
// lose its last moments of records, never corrupt them.
//
// # Imports and concurrency
//
// It imports failure, internal/pgdb, the standard library, modernc.org/sqlite and pgx. Meter,
// Ticket and both ledgers are safe for concurrent use. Lock order: a Meter's mu is never held
// while the ledger is called. A SQLite ledger owns one goroutine (the flusher of queued
// writes), a Postgres ledger one (lease renewal); Close stops it and waits for it.
package budget
