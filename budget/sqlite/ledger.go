package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/budget/internal/lazy"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/owner"
	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// LedgerFile is the SQLite ledger's file name under the data dir.
const LedgerFile = "ledger.db"

// Options tunes Open; nil means defaults.
type Options struct {
	// BusyTimeout is how long a write waits for another process's lock; default 10s.
	BusyTimeout time.Duration

	// checkpointed hears the WAL's frames after each background checkpoint (tests).
	checkpointed chan<- int
}

// The one contract, required whole (budget.Ledger).
var _ budget.Ledger = (*Ledger)(nil)

// Ledger is the single-machine budget.Ledger: one SQLite file in WAL mode, shared safely by the
// goroutines of this process (writes are committed in batches, one at a time, so they never
// spin on the busy handler: batch.go) and by other processes (write transactions are BEGIN
// IMMEDIATE and wait up to the busy timeout).
//
// Each open ledger is an owner: calls it starts carry its owner id, and it holds an exclusive
// flock (internal/owner.Lock) on a file named for that id next to the database while open. Recover treats a call as
// orphaned only when its owner's lock can be taken, i.e. the owner closed or died (the kernel
// drops a dead process's flocks), so a second process starting up never steals a live
// process's calls.
type Ledger struct {
	db     *sql.DB
	lock   *owner.Lock // this ledger's liveness lock, in locks
	locks  string      // the directory of every opener's lock
	opened time.Time   // when lock was taken

	// batch is the write queue: writes are committed in batches, one batch at a time.
	batch *batcher
	// ckpt is the checkpointer's loop: commits poke it (checkpoint.go).
	ckpt         *lazy.Loop
	checkpointed chan<- int

	smu   sync.Mutex // guards stmts
	stmts map[string]*sql.Stmt

	closeOnce sync.Once
	closeErr  error
}

const schema = `
CREATE TABLE IF NOT EXISTS runs (
	tenant          TEXT    NOT NULL,
	run_id          TEXT    NOT NULL,
	started_at      INTEGER NOT NULL,
	ended_at        INTEGER,
	calls           INTEGER NOT NULL DEFAULT 0,
	transfer_bytes  INTEGER NOT NULL DEFAULT 0,
	produced_bytes  INTEGER NOT NULL DEFAULT 0,
	preserved_bytes INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (tenant, run_id)
);
CREATE TABLE IF NOT EXISTS executions (
	id              TEXT    PRIMARY KEY,
	tenant          TEXT    NOT NULL,
	run_id          TEXT    NOT NULL,
	started_at      INTEGER NOT NULL,
	ended_at        INTEGER,
	status          TEXT    NOT NULL DEFAULT 'running',
	attachments     TEXT,
	calls           INTEGER NOT NULL DEFAULT 0,
	transfer_bytes  INTEGER NOT NULL DEFAULT 0,
	produced_bytes  INTEGER NOT NULL DEFAULT 0,
	preserved_bytes INTEGER NOT NULL DEFAULT 0,
	agent_version   TEXT    NOT NULL DEFAULT '',
	binding_bytes   INTEGER NOT NULL DEFAULT 0,
	returned_bytes  INTEGER NOT NULL DEFAULT 0,
	kept_out_bytes  INTEGER NOT NULL DEFAULT 0,
	network         TEXT
);
CREATE TABLE IF NOT EXISTS tool_calls (
	id              TEXT    PRIMARY KEY,
	tenant          TEXT    NOT NULL,
	run_id          TEXT    NOT NULL,
	execution_id    TEXT    NOT NULL,
	tool            TEXT    NOT NULL,
	argument_bytes  INTEGER NOT NULL,
	owner           TEXT    NOT NULL,
	status          TEXT    NOT NULL,
	spent           INTEGER NOT NULL,
	started_at      INTEGER NOT NULL,
	finished_at     INTEGER,
	transfer_bytes  INTEGER NOT NULL DEFAULT 0,
	produced_bytes  INTEGER NOT NULL DEFAULT 0,
	preserved_bytes INTEGER NOT NULL DEFAULT 0,
	attachments     TEXT,
	kind            TEXT    NOT NULL DEFAULT '',
	message         TEXT    NOT NULL DEFAULT '',
	times           INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS tool_calls_open ON tool_calls (owner) WHERE status = 'started';
CREATE INDEX IF NOT EXISTS tool_calls_run ON tool_calls (tenant, run_id);
-- approvals came later: CREATE IF NOT EXISTS adds them to an older file.
CREATE TABLE IF NOT EXISTS approvals (
	id              TEXT    PRIMARY KEY,
	tenant          TEXT    NOT NULL,
	run_id          TEXT    NOT NULL,
	execution_id    TEXT    NOT NULL,
	call_id         TEXT    NOT NULL,
	tool            TEXT    NOT NULL,
	reason          TEXT    NOT NULL DEFAULT '',
	owner           TEXT    NOT NULL,
	status          TEXT    NOT NULL,
	answered_by     TEXT    NOT NULL DEFAULT '',
	asked_at        INTEGER NOT NULL,
	decided_at      INTEGER,
	times           INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS approvals_open ON approvals (owner) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS approvals_run ON approvals (tenant, run_id);
-- 5: the cassettes of recorded executions (cassettes.go), kept for export.
CREATE TABLE IF NOT EXISTS cassettes (
	execution_id    TEXT    PRIMARY KEY,
	tenant          TEXT    NOT NULL,
	run_id          TEXT    NOT NULL,
	data            BLOB    NOT NULL,
	recorded_at     INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS cassettes_run ON cassettes (tenant, run_id);
CREATE INDEX IF NOT EXISTS cassettes_recorded ON cassettes (recorded_at);
-- 6: the shapes of tools' results, per tenant, upstream, tool and definition (observed.go).
CREATE TABLE IF NOT EXISTS observed_shapes (
	tenant          TEXT    NOT NULL,
	upstream        TEXT    NOT NULL,
	tool            TEXT    NOT NULL,
	definition      TEXT    NOT NULL,
	samples         INTEGER NOT NULL,
	shape           BLOB    NOT NULL,
	updated_at      INTEGER NOT NULL,
	PRIMARY KEY (tenant, upstream, tool, definition)
);
CREATE INDEX IF NOT EXISTS observed_shapes_age ON observed_shapes (tenant, updated_at);
-- 7: calls paused on a person's approval, with their program's journal (pause.go).
CREATE TABLE IF NOT EXISTS pauses (
	id              TEXT    PRIMARY KEY,
	tenant          TEXT    NOT NULL,
	agent           TEXT    NOT NULL,
	run_key         TEXT    NOT NULL,
	hold            TEXT    NOT NULL,
	tool            TEXT    NOT NULL,
	arguments       TEXT    NOT NULL,
	view            TEXT    NOT NULL DEFAULT '',
	reason          TEXT    NOT NULL,
	seq             INTEGER NOT NULL,
	journal         TEXT,
	resumable       INTEGER NOT NULL,
	asked_at        INTEGER NOT NULL,
	expires_at      INTEGER NOT NULL,
	status          TEXT    NOT NULL,
	answered_by     TEXT    NOT NULL DEFAULT '',
	decided_at      INTEGER,
	claimed         INTEGER NOT NULL DEFAULT 0,
	owner           TEXT    NOT NULL,
	result          TEXT
);
CREATE INDEX IF NOT EXISTS pauses_pending ON pauses (asked_at) WHERE status = 'pending';
`

// indexesAdded are created after the migration, since they may name columnsAdded.
const indexesAdded = `
CREATE INDEX IF NOT EXISTS executions_run ON executions (tenant, run_id);
`

// Open opens (creating if need be) the ledger in dataDir/LedgerFile.
func Open(ctx context.Context, dataDir string, opts *Options) (*Ledger, error) {
	busy := 10 * time.Second
	if opts != nil && opts.BusyTimeout > 0 {
		busy = opts.BusyTimeout
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("budget: ledger dir: %w", err)
	}
	path := filepath.Join(dataDir, LedgerFile)
	if err := private(dataDir, path); err != nil {
		return nil, fmt.Errorf("budget: ledger: %w", err)
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "wal_autocheckpoint(0)") // the checkpointer's job (checkpoint.go)
	q.Add("_pragma", "foreign_keys(ON)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("budget: open ledger: %w", err)
	}
	db.SetMaxOpenConns(8)
	// A file this version has set up says so in user_version; only another needs the schema
	// and migrations, which otherwise cost an open half its time.
	var version int
	if err := db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		db.Close()
		return nil, fmt.Errorf("budget: open ledger: %w", err)
	}
	if version != sqliteSchemaVersion {
		if _, err := db.ExecContext(ctx, schema+plansSchema+programsSchema+tasksSchema); err != nil {
			db.Close()
			return nil, fmt.Errorf("budget: ledger schema: %w", err)
		}
		if err := migrate(ctx, db); err != nil {
			db.Close()
			return nil, fmt.Errorf("budget: ledger migration: %w", err)
		}
		if version < sqliteSchemaVersion { // a newer binary's file keeps its mark
			if _, err := db.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, sqliteSchemaVersion)); err != nil {
				db.Close()
				return nil, fmt.Errorf("budget: ledger schema version: %w", err)
			}
		}
	}
	lock, err := owner.Hold(path+"-owners", budget.NewID("o_"))
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("budget: ledger owner: %w", err)
	}
	s := &Ledger{db: db, lock: lock, locks: path + "-owners", opened: time.Now(), batch: newBatcher(), ckpt: lazy.NewLoop()}
	if opts != nil {
		s.checkpointed = opts.checkpointed
	}
	go s.flusher()
	go s.checkpointer()
	return s, nil
}

// private makes the ledger's state readable by its owner only: dir 0700, and the ledger file
// created 0600 before SQLite opens it (SQLite gives its -wal and -shm files the database file's
// mode). A dir or file an older version left open to others is tightened.
func private(dir, path string) error {
	if err := tighten(dir); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal", path + "-owners"} {
		if err := tighten(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// tighten takes the group and other permission bits off path.
func tighten(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return os.Chmod(path, st.Mode().Perm()&^0o077)
	}
	return nil
}

// sqliteSchemaVersion is the ledger file's PRAGMA user_version once schema, columnsAdded,
// indexesAdded and runContextKept are in it. Bump it with each change to them.
const sqliteSchemaVersion = 13

// columnsAdded are the columns later versions added to tables an older ledger file already
// has; migrate adds the missing ones, so a data dir outlives an upgrade.
var columnsAdded = []struct{ table, column, decl string }{
	{"executions", "agent_version", `TEXT NOT NULL DEFAULT ''`},
	{"executions", "binding_bytes", `INTEGER NOT NULL DEFAULT 0`},
	{"executions", "returned_bytes", `INTEGER NOT NULL DEFAULT 0`},
	{"executions", "kept_out_bytes", `INTEGER NOT NULL DEFAULT 0`},
	// 4: a summary of refusals stands for several calls (Refusal.Times).
	{"tool_calls", "times", `INTEGER NOT NULL DEFAULT 1`},
	{"approvals", "times", `INTEGER NOT NULL DEFAULT 1`},
	// 7: what an execution's egress proxy decided (egress.Stats.Record's JSON, held as it is; NULL without rules).
	{"executions", "network", `TEXT`},
	// 9: a pause's arguments as the person was shown them, for the operator (budget.Pause.View).
	{"pauses", "view", `TEXT NOT NULL DEFAULT ''`},
	// 11: the Run's context economy, its ended executions' summed (runContextKept).
	{"runs", "binding_bytes", `INTEGER NOT NULL DEFAULT 0`},
	{"runs", "returned_bytes", `INTEGER NOT NULL DEFAULT 0`},
	{"runs", "kept_out_bytes", `INTEGER NOT NULL DEFAULT 0`},
	// 13: a working task's calls so far (budget.Task.Calls).
	{"tasks", "calls", `TEXT`},
}

// runContextKept keeps each Run's context economy on its row (version 12): RunContext, read
// at the end of every execution, summed it over every ended execution of the Run, linear in a
// long session (210 µs in a Run of 500; a tenth of the server's CPU a forked execution in a
// Run of 1,500: docs/design.md §19.4). A trigger, part of the file's schema, adds an
// execution's figures as it ends, so a binary of an older version sharing the file keeps the
// sums exact too; the sums are computed afresh in the transaction that creates it, so no end
// is counted twice or missed.
const runContextKept = `
CREATE TRIGGER IF NOT EXISTS runs_context AFTER UPDATE OF ended_at, binding_bytes, returned_bytes, kept_out_bytes ON executions
BEGIN
	UPDATE runs SET
		binding_bytes = binding_bytes + (CASE WHEN new.ended_at IS NULL THEN 0 ELSE new.binding_bytes END)
			- (CASE WHEN old.ended_at IS NULL THEN 0 ELSE old.binding_bytes END),
		returned_bytes = returned_bytes + (CASE WHEN new.ended_at IS NULL THEN 0 ELSE new.returned_bytes END)
			- (CASE WHEN old.ended_at IS NULL THEN 0 ELSE old.returned_bytes END),
		kept_out_bytes = kept_out_bytes + (CASE WHEN new.ended_at IS NULL THEN 0 ELSE new.kept_out_bytes END)
			- (CASE WHEN old.ended_at IS NULL THEN 0 ELSE old.kept_out_bytes END)
	WHERE tenant = new.tenant AND run_id = new.run_id;
END;
UPDATE runs SET (binding_bytes, returned_bytes, kept_out_bytes) = (
	SELECT coalesce(sum(e.binding_bytes), 0), coalesce(sum(e.returned_bytes), 0), coalesce(sum(e.kept_out_bytes), 0)
	FROM executions e WHERE e.tenant = runs.tenant AND e.run_id = runs.run_id AND e.ended_at IS NOT NULL);
`

func migrate(ctx context.Context, db *sql.DB) error {
	for _, c := range columnsAdded {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info(?) WHERE name = ?`, c.table, c.column).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			if _, err := db.ExecContext(ctx, fmt.Sprintf(`ALTER TABLE %s ADD COLUMN %s %s`, c.table, c.column, c.decl)); err != nil &&
				!strings.Contains(err.Error(), "duplicate column") { // another process got there first
				return err
			}
		}
	}
	if _, err := db.ExecContext(ctx, indexesAdded); err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil) // BEGIN IMMEDIATE (_txlock): no end slips between the two
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, runContextKept); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// Close releases the ledger; calls still started stay so, for a later Recover.
func (s *Ledger) Close() error {
	s.closeOnce.Do(func() {
		s.closeBatches()
		s.ckpt.Halt()
		s.smu.Lock()
		for _, st := range s.stmts {
			st.Close()
		}
		s.stmts = nil
		s.smu.Unlock()
		s.closeErr = errors.Join(s.db.Close(), s.lock.Release())
	})
	return s.closeErr
}

func now() int64 { return time.Now().UnixNano() }

// stmtTx is a write transaction whose statements are prepared once per ledger and reused:
// parsing the SQL again for every statement was most of what a binding call's two records
// cost.
//
// Its statements run without their caller's cancellation (context.WithoutCancel): a write a
// batch has taken runs to its end and its result stands (lazy.Leave), and the driver starts a
// goroutine to watch a cancellable context for every statement it runs: with the batch's
// BEGIN and COMMIT (batch.go), eight a binding call's two records, started and woken.
type stmtTx struct {
	*sql.Tx
	s *Ledger
	// owed is the bytes finished calls and charges add to each Run's row, not yet written: a
	// call's admission in the same transaction writes them with its count (admitRun), and the
	// rest are written before the commit (settle). So the previous call's finish and the next
	// call's start update the Run's row once, not twice (docs/design.md §19.3).
	owed map[budget.RunRef]budget.Usage
}

// owe adds u to what run's row is owed.
func (t *stmtTx) owe(run budget.RunRef, u budget.Usage) {
	if t.owed == nil {
		t.owed = map[budget.RunRef]budget.Usage{}
	}
	t.owed[run] = t.owed[run].Add(u)
}

// settle writes what run's row is owed; with no run given, what every Run's row is owed.
func (t *stmtTx) settle(ctx context.Context, runs ...budget.RunRef) error {
	if len(runs) == 0 {
		for run := range t.owed {
			runs = append(runs, run)
		}
	}
	for _, run := range runs {
		u, ok := t.owed[run]
		if !ok {
			continue
		}
		delete(t.owed, run)
		if _, err := t.ExecContext(ctx, `UPDATE runs SET transfer_bytes = transfer_bytes + ?, produced_bytes = produced_bytes + ?,
			preserved_bytes = preserved_bytes + ? WHERE tenant = ? AND run_id = ?`,
			u.TransferBytes, u.ProducedBytes, u.PreservedBytes, run.Tenant, run.ID); err != nil {
			return err
		}
	}
	return nil
}

func (t *stmtTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	ctx = context.WithoutCancel(ctx)
	st, err := t.s.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return t.Tx.StmtContext(ctx, st).ExecContext(ctx, args...)
}

func (t *stmtTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	ctx = context.WithoutCancel(ctx)
	st, err := t.s.stmt(ctx, query)
	if err != nil {
		return t.Tx.QueryRowContext(ctx, query, args...) // reports the same error through Scan
	}
	return t.Tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
}

// stmt returns the ledger's prepared statement for query, preparing it the first time.
func (s *Ledger) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	s.smu.Lock()
	defer s.smu.Unlock()
	if st, ok := s.stmts[query]; ok {
		return st, nil
	}
	st, err := s.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if s.stmts == nil {
		s.stmts = map[string]*sql.Stmt{}
	}
	s.stmts[query] = st
	return st, nil
}

// prepared runs a read through the ledger's prepared statements (Ledger.stmt), so the
// reads every execution makes are not parsed and planned again each time.
type prepared struct{ s *Ledger }

func (p prepared) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := p.s.stmt(ctx, query)
	if err != nil {
		return p.s.db.QueryRowContext(ctx, query, args...) // reports the same error through Scan
	}
	return st.QueryRowContext(ctx, args...)
}

const ensureRun = `INSERT INTO runs (tenant, run_id, started_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`

func (s *Ledger) StartRun(ctx context.Context, run budget.RunRef) error {
	return s.write(ctx, func(tx *stmtTx) error {
		_, err := tx.ExecContext(ctx, ensureRun, run.Tenant, run.ID, now())
		return err
	})
}

func (s *Ledger) EndRun(ctx context.Context, run budget.RunRef) error {
	return s.write(ctx, func(tx *stmtTx) error {
		r, err := tx.ExecContext(ctx, `UPDATE runs SET ended_at = ? WHERE tenant = ? AND run_id = ?`, now(), run.Tenant, run.ID)
		return mustAffect(r, err)
	})
}

// StartExecution's usage is read in its own transaction, after the finishes queued before it
// (a batch runs its writes in the order they came), so the Run's usage it returns costs no
// flush and no read of its own (docs/design.md §19.5).
func (s *Ledger) StartExecution(ctx context.Context, run budget.RunRef, id, agentVersion string) (budget.Usage, error) {
	var u budget.Usage
	err := s.write(ctx, func(tx *stmtTx) error {
		t := now()
		if _, err := tx.ExecContext(ctx, ensureRun, run.Tenant, run.ID, t); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO executions (id, tenant, run_id, started_at, agent_version) VALUES (?, ?, ?, ?, ?)`,
			id, run.Tenant, run.ID, t, agentVersion); err != nil {
			return err
		}
		if err := tx.settle(ctx, run); err != nil {
			return err
		}
		var err error
		u, err = runUsage(ctx, tx, run) // set afresh: a batch may run this twice (batch.go)
		return err
	})
	if err != nil {
		return budget.Usage{}, err
	}
	return u, nil
}

// EndExecution's context economy is read from the Run's row in the same transaction, once
// the trigger (runContextKept) has counted this end.
func (s *Ledger) EndExecution(ctx context.Context, end budget.ExecutionEnd) (telemetry.Context, error) {
	var run telemetry.Context
	err := s.write(ctx, func(tx *stmtTx) error {
		c, u := end.Context, end.Usage
		r, err := tx.ExecContext(ctx, `UPDATE executions SET ended_at = ?, status = ?, attachments = ?,
			binding_bytes = ?, returned_bytes = ?, kept_out_bytes = ?, network = ?,
			calls = ?, transfer_bytes = ?, produced_bytes = ?, preserved_bytes = ? WHERE id = ?`,
			now(), end.Status, nullJSON(end.Attachments), c.BindingBytes, c.ReturnedBytes, c.KeptOutBytes,
			nullJSON(end.Network), u.Calls, u.TransferBytes, u.ProducedBytes, u.PreservedBytes, end.ID)
		if err := mustAffect(r, err); err != nil {
			return err
		}
		run = telemetry.Context{} // set afresh: a batch may run this twice (batch.go)
		err = tx.QueryRowContext(ctx, `SELECT r.binding_bytes, r.returned_bytes, r.kept_out_bytes FROM executions e
			JOIN runs r ON r.tenant = e.tenant AND r.run_id = e.run_id WHERE e.id = ?`, end.ID).
			Scan(&run.BindingBytes, &run.ReturnedBytes, &run.KeptOutBytes)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // an execution of a Run without a row: no sums to read
		}
		return err
	})
	if err != nil {
		return telemetry.Context{}, err
	}
	return run, nil
}

func (s *Ledger) StartCall(ctx context.Context, c budget.CallStart, runLimits budget.Limits) (budget.Usage, error) {
	var after budget.Usage
	var refusal *failure.Error
	err := s.write(ctx, func(tx *stmtTx) error {
		after, refusal = budget.Usage{}, nil // a batch may run this twice (batch.go)
		t := now()
		if c.ExecutionID == "" {
			// A direct call may be its Run's first record, and is recorded, not metered.
			if _, err := tx.ExecContext(ctx, ensureRun, c.Run.Tenant, c.Run.ID, t); err != nil {
				return err
			}
			if err := tx.settle(ctx, c.Run); err != nil {
				return err
			}
			u, err := runUsage(ctx, tx, c.Run)
			if err != nil {
				return err
			}
			after = u
			return insertCall(ctx, tx, budget.Refusal{CallStart: c}, s.lock.ID(), budget.Started, true, t)
		}
		// One conditional UPDATE checks every meter of the Run and counts the call.
		u, err := admitRun(ctx, tx, c.Run, runLimits)
		if errors.Is(err, sql.ErrNoRows) {
			// Spent, or (a Run StartExecution did not make) missing: the usage says which.
			if err := tx.settle(ctx, c.Run); err != nil {
				return err
			}
			if u, err = runUsage(ctx, tx, c.Run); err != nil {
				return err
			}
			if refusal = budget.RunRefusal(u, runLimits); refusal != nil {
				after = u
				return insertCall(ctx, tx, budget.Refusal{CallStart: c, Kind: string(refusal.Kind), Message: refusal.Message}, s.lock.ID(), budget.Refused, false, t)
			}
			if _, err := tx.ExecContext(ctx, ensureRun, c.Run.Tenant, c.Run.ID, t); err != nil {
				return err
			}
			u, err = admitRun(ctx, tx, c.Run, runLimits)
		}
		if err != nil {
			return err
		}
		if err := insertCall(ctx, tx, budget.Refusal{CallStart: c}, s.lock.ID(), budget.Started, true, t); err != nil {
			return err
		}
		after = u
		return nil
	})
	if err != nil {
		return budget.Usage{}, err
	}
	if refusal != nil {
		return after, refusal
	}
	return after, nil
}

// admitRun writes what run's row is owed (stmtTx.owe) and counts one call against run if
// every meter, those bytes added, is below runLimits, and returns the Run's usage after it;
// sql.ErrNoRows when a meter is spent or the Run is missing (the bytes are owed again then).
func admitRun(ctx context.Context, tx *stmtTx, run budget.RunRef, l budget.Limits) (budget.Usage, error) {
	var u budget.Usage
	c := budget.RunCeiling(l)
	d := tx.owed[run]
	delete(tx.owed, run)
	err := tx.QueryRowContext(ctx, `UPDATE runs SET calls = calls + 1, transfer_bytes = transfer_bytes + ?,
		produced_bytes = produced_bytes + ?, preserved_bytes = preserved_bytes + ? WHERE tenant = ? AND run_id = ?
		AND calls < ? AND transfer_bytes + ? < ? AND produced_bytes + ? < ? AND preserved_bytes + ? < ?
		RETURNING calls, transfer_bytes, produced_bytes, preserved_bytes`,
		d.TransferBytes, d.ProducedBytes, d.PreservedBytes, run.Tenant, run.ID, c.Calls,
		d.TransferBytes, c.TransferBytes, d.ProducedBytes, c.ProducedBytes, d.PreservedBytes, c.PreservedBytes).
		Scan(&u.Calls, &u.TransferBytes, &u.ProducedBytes, &u.PreservedBytes)
	if err != nil && d != (budget.Usage{}) {
		tx.owe(run, d)
	}
	return u, err
}

// insertCall writes the record of r's call: started (r's Kind and Message empty), or refused.
func insertCall(ctx context.Context, tx *stmtTx, r budget.Refusal, owner string, st budget.CallStatus, spent bool, t int64) error {
	var fin any
	if st != budget.Started {
		fin = t
	}
	c := r.CallStart
	_, err := tx.ExecContext(ctx, `INSERT INTO tool_calls
		(id, tenant, run_id, execution_id, tool, argument_bytes, owner, status, spent, started_at, finished_at, kind, message, times)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		c.ID, c.Run.Tenant, c.Run.ID, c.ExecutionID, c.Tool, c.ArgumentBytes, owner, string(st), spent, t, fin, r.Kind, r.Message, times(r.Times))
	return err
}

func (s *Ledger) RefuseCall(ctx context.Context, r budget.Refusal) error {
	return s.write(ctx, func(tx *stmtTx) error {
		t := now()
		if _, err := tx.ExecContext(ctx, ensureRun, r.Run.Tenant, r.Run.ID, t); err != nil {
			return err
		}
		return insertCall(ctx, tx, r, s.lock.ID(), budget.Refused, false, t)
	})
}

func (s *Ledger) FinishCall(ctx context.Context, f budget.CallFinish) error {
	if !f.Status.Finishing() {
		return fmt.Errorf("budget: %q does not finish a call", f.Status)
	}
	return s.write(ctx, s.finishCall(ctx, f))
}

// FinishCallLater is FinishCall committed with the next batch of writes (batch.go): the
// tool_call_finished of a program's call may lag; its tool_call_started may not.
func (s *Ledger) FinishCallLater(ctx context.Context, f budget.CallFinish) error {
	if !f.Status.Finishing() {
		return fmt.Errorf("budget: %q does not finish a call", f.Status)
	}
	return s.writeLater(ctx, s.finishCall(ctx, f))
}

func (s *Ledger) finishCall(ctx context.Context, f budget.CallFinish) func(tx *stmtTx) error {
	return func(tx *stmtTx) error {
		// One statement finds and finishes the call (RETURNING), so the common case costs no
		// separate look-up; only a call that is not there, or not started, takes a second.
		var tenant, runID, execID string
		u := f.Usage
		err := tx.QueryRowContext(ctx, `UPDATE tool_calls SET status = ?, finished_at = ?, transfer_bytes = ?,
			produced_bytes = ?, preserved_bytes = ?, attachments = ?, kind = ?, message = ?
			WHERE id = ? AND status = 'started' RETURNING tenant, run_id, execution_id`,
			string(f.Status), now(), u.TransferBytes, u.ProducedBytes, u.PreservedBytes, nullJSON(f.Attachments),
			f.Kind, f.Message, f.ID).Scan(&tenant, &runID, &execID)
		if errors.Is(err, sql.ErrNoRows) {
			var status string
			err := tx.QueryRowContext(ctx, `SELECT status FROM tool_calls WHERE id = ?`, f.ID).Scan(&status)
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("%w: call %s", budget.ErrNotFound, f.ID)
			}
			if err != nil {
				return err
			}
			return fmt.Errorf("%w: call %s is %s", budget.ErrAlreadyFinished, f.ID, status)
		}
		if err != nil {
			return err
		}
		if execID == "" {
			return nil
		}
		// The execution's row counts its calls' usage when it ends (EndExecution; Execution
		// sums a running one's calls): only the Run's meters are kept as calls finish.
		tx.owe(budget.RunRef{Tenant: tenant, ID: runID}, u)
		return nil
	}
}

func (s *Ledger) Charge(ctx context.Context, run budget.RunRef, execID string, u budget.Usage) error {
	if u.Calls != 0 {
		return errors.New("budget: Charge cannot count calls")
	}
	return s.write(ctx, func(tx *stmtTx) error {
		if _, err := tx.ExecContext(ctx, ensureRun, run.Tenant, run.ID, now()); err != nil {
			return err
		}
		tx.owe(run, u)
		if execID == "" {
			return nil
		}
		// Bytes charged outside any call (an output preserved, a window read): the row holds
		// them while the execution runs, and EndExecution sets its whole usage.
		_, err := tx.ExecContext(ctx, `UPDATE executions SET transfer_bytes = transfer_bytes + ?, produced_bytes = produced_bytes + ?,
			preserved_bytes = preserved_bytes + ? WHERE id = ?`, u.TransferBytes, u.ProducedBytes, u.PreservedBytes, execID)
		return err
	})
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func runUsage(ctx context.Context, q querier, run budget.RunRef) (budget.Usage, error) {
	var u budget.Usage
	err := q.QueryRowContext(ctx, `SELECT calls, transfer_bytes, produced_bytes, preserved_bytes FROM runs
		WHERE tenant = ? AND run_id = ?`, run.Tenant, run.ID).
		Scan(&u.Calls, &u.TransferBytes, &u.ProducedBytes, &u.PreservedBytes)
	if errors.Is(err, sql.ErrNoRows) {
		return budget.Usage{}, nil
	}
	return u, err
}

func (s *Ledger) RunUsage(ctx context.Context, run budget.RunRef) (budget.Usage, error) {
	if err := s.Flush(ctx); err != nil {
		return budget.Usage{}, err
	}
	u, err := runUsage(ctx, prepared{s}, run)
	if err != nil {
		return budget.Usage{}, fmt.Errorf("budget: run usage: %w", err)
	}
	return u, nil
}

func (s *Ledger) RunContext(ctx context.Context, run budget.RunRef) (telemetry.Context, error) {
	if err := s.Flush(ctx); err != nil {
		return telemetry.Context{}, err
	}
	var c telemetry.Context
	err := prepared{s}.QueryRowContext(ctx, `SELECT binding_bytes, returned_bytes, kept_out_bytes FROM runs
		WHERE tenant = ? AND run_id = ?`, run.Tenant, run.ID).Scan(&c.BindingBytes, &c.ReturnedBytes, &c.KeptOutBytes)
	if errors.Is(err, sql.ErrNoRows) {
		return telemetry.Context{}, nil // a Run never seen
	}
	if err != nil {
		return telemetry.Context{}, fmt.Errorf("budget: run context: %w", err)
	}
	return c, nil
}

const callColumns = `id, tenant, run_id, execution_id, tool, argument_bytes, status, spent, started_at,
	finished_at, transfer_bytes, produced_bytes, preserved_bytes, attachments, kind, message, times`

type scanner interface{ Scan(dest ...any) error }

// nullTime is a nullable column of Unix nanoseconds as a time: the zero time for NULL.
func nullTime(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64)
}

// nullBytes is a nullable text column as bytes: nil for NULL.
func nullBytes(s sql.NullString) []byte {
	if !s.Valid {
		return nil
	}
	return []byte(s.String)
}

func scanCall(r scanner) (budget.CallRecord, error) {
	var c budget.CallRecord
	var status string
	var started int64
	var finished sql.NullInt64
	var att sql.NullString
	err := r.Scan(&c.ID, &c.Run.Tenant, &c.Run.ID, &c.ExecutionID, &c.Tool, &c.ArgumentBytes, &status, &c.Spent,
		&started, &finished, &c.Usage.TransferBytes, &c.Usage.ProducedBytes, &c.Usage.PreservedBytes, &att, &c.Kind, &c.Message, &c.Times)
	if err != nil {
		return budget.CallRecord{}, err
	}
	c.Status = budget.CallStatus(status)
	c.StartedAt, c.FinishedAt, c.Attachments = time.Unix(0, started), nullTime(finished), nullBytes(att)
	if c.Spent {
		c.Usage.Calls = 1
	}
	return c, nil
}

func (s *Ledger) Call(ctx context.Context, id string) (budget.CallRecord, error) {
	if err := s.Flush(ctx); err != nil {
		return budget.CallRecord{}, err
	}
	c, err := scanCall(prepared{s}.QueryRowContext(ctx, `SELECT `+callColumns+` FROM tool_calls WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return budget.CallRecord{}, fmt.Errorf("%w: call %s", budget.ErrNotFound, id)
	}
	return c, err
}

func (s *Ledger) Calls(ctx context.Context, run budget.RunRef) ([]budget.CallRecord, error) {
	if err := s.Flush(ctx); err != nil {
		return nil, err
	}
	return queryAll(ctx, s.db, "calls", scanCall, `SELECT `+callColumns+` FROM tool_calls WHERE tenant = ? AND run_id = ?
		ORDER BY started_at, rowid`, run.Tenant, run.ID)
}

// queryAll runs query with args on db and scans every row it answers with scan; what names the
// query in its error.
func queryAll[T any](ctx context.Context, db *sql.DB, what string, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("budget: %s: %w", what, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func (s *Ledger) AskApproval(ctx context.Context, a budget.ApprovalAsk) error {
	if err := a.Check(); err != nil {
		return err
	}
	return s.write(ctx, func(tx *stmtTx) error {
		t := now()
		if _, err := tx.ExecContext(ctx, ensureRun, a.Run.Tenant, a.Run.ID, t); err != nil {
			return err
		}
		var decided any
		if a.Status != budget.ApprovalPending {
			decided = t
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO approvals
			(id, tenant, run_id, execution_id, call_id, tool, reason, owner, status, asked_at, decided_at, times)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			a.ID, a.Run.Tenant, a.Run.ID, a.ExecutionID, a.CallID, a.Tool, a.Reason, s.lock.ID(), string(a.Status), t, decided, times(a.Times))
		return err
	})
}

func (s *Ledger) DecideApproval(ctx context.Context, d budget.ApprovalDecision) error {
	if !d.Status.Deciding() {
		return fmt.Errorf("budget: %q does not decide an approval", d.Status)
	}
	return s.write(ctx, func(tx *stmtTx) error {
		r, err := tx.ExecContext(ctx, `UPDATE approvals SET status = ?, answered_by = ?, decided_at = ?
			WHERE id = ? AND status = 'pending'`, string(d.Status), d.AnsweredBy, now(), d.ID)
		if err != nil {
			return err
		}
		if n, err := r.RowsAffected(); err != nil || n == 1 {
			return err
		}
		var status string
		err = tx.QueryRowContext(ctx, `SELECT status FROM approvals WHERE id = ?`, d.ID).Scan(&status)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: approval %s", budget.ErrNotFound, d.ID)
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("%w: approval %s is %s", budget.ErrAlreadyFinished, d.ID, status)
	})
}

const approvalColumns = `id, tenant, run_id, execution_id, call_id, tool, reason, status, answered_by, asked_at, decided_at, times`

func (s *Ledger) Approvals(ctx context.Context, run budget.RunRef) ([]budget.ApprovalRecord, error) {
	return queryAll(ctx, s.db, "approvals", scanApproval, `SELECT `+approvalColumns+` FROM approvals WHERE tenant = ? AND run_id = ?
		ORDER BY asked_at, id`, run.Tenant, run.ID)
}

func scanApproval(r scanner) (budget.ApprovalRecord, error) {
	var a budget.ApprovalRecord
	var status string
	var asked int64
	var decided sql.NullInt64
	if err := r.Scan(&a.ID, &a.Run.Tenant, &a.Run.ID, &a.ExecutionID, &a.CallID, &a.Tool, &a.Reason, &status,
		&a.AnsweredBy, &asked, &decided, &a.Times); err != nil {
		return a, err
	}
	a.Status, a.AskedAt, a.DecidedAt = budget.ApprovalStatus(status), time.Unix(0, asked), nullTime(decided)
	return a, nil
}

func (s *Ledger) Recover(ctx context.Context) ([]budget.CallRecord, error) {
	if err := s.Flush(ctx); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT owner FROM tool_calls WHERE status = 'started' AND owner != ?
		UNION SELECT owner FROM approvals WHERE status = 'pending' AND owner != ?
		UNION SELECT owner FROM tasks WHERE status IN ('working', 'input_required') AND owner != ?`, s.lock.ID(), s.lock.ID(), s.lock.ID())
	if err != nil {
		return nil, fmt.Errorf("budget: recover: %w", err)
	}
	var owners []string
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			rows.Close()
			return nil, err
		}
		owners = append(owners, o)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []budget.CallRecord
	for _, o := range owners {
		gone, unlock, err := owner.Claim(s.locks, o)
		if err != nil {
			return out, err
		}
		if !gone {
			continue
		}
		recovered := len(out)
		err = s.write(ctx, func(tx *stmtTx) error {
			out = out[:recovered] // a batch may run this twice (batch.go)
			// RETURNING: only the calls this pass changed, so survivors recovering the same
			// owner at once (a closed owner's lock file is gone, so none holds it) report each
			// call once between them.
			if _, err := tx.ExecContext(ctx, `UPDATE approvals SET status = 'unknown', decided_at = ?
				WHERE owner = ? AND status = 'pending'`, now(), o); err != nil {
				return err
			}
			if err := failLostTasks(ctx, tx, o); err != nil {
				return err
			}
			rs, err := tx.QueryContext(ctx, `UPDATE tool_calls SET status = 'unknown', finished_at = ?,
				message = 'the host stopped while the call was in flight; it is counted and not replayed'
				WHERE owner = ? AND status = 'started' RETURNING `+callColumns, now(), o)
			if err != nil {
				return err
			}
			defer rs.Close()
			for rs.Next() {
				c, err := scanCall(rs)
				if err != nil {
					return err
				}
				out = append(out, c)
			}
			return rs.Err()
		})
		unlock()
		if err != nil {
			return out, fmt.Errorf("budget: recover: %w", err)
		}
	}
	budget.SortByStart(out)
	return out, nil
}

func mustAffect(r sql.Result, err error) error {
	if err != nil {
		return err
	}
	if n, err := r.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return budget.ErrNotFound
	}
	return nil
}

func nullJSON(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// times is a record's Times as stored: 0 means 1.
func times(n int64) int64 { return max(n, 1) }

// LeaseHeldUntil is budget.NeverLapses: this owner's lock is held for as long as its process
// lives (the kernel drops it when the process dies), so no survivor records its calls
// unknown meanwhile.
func (s *Ledger) LeaseHeldUntil() time.Time { return budget.NeverLapses }

// LeaseHeldSince is when the ledger was opened and took its lock, before any call it starts.
func (s *Ledger) LeaseHeldSince() time.Time { return s.opened }
