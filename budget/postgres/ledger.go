package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/pgdb"
	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
)

// DefaultLeaseTTL is how long a PostgreSQL ledger's lease lasts without renewal: a replica
// that stops renewing (killed, partitioned, frozen) has its in-flight calls recorded unknown
// by a survivor within about this long plus one recovery interval.
const DefaultLeaseTTL = 30 * time.Second

// Options tunes Open; nil means defaults.
type Options struct {
	// LeaseTTL is the lease's lifetime (default DefaultLeaseTTL, at least one second); it is
	// renewed every LeaseTTL/3.
	LeaseTTL time.Duration
	// Logger hears a lost lease and failed renewals; nil means slog.Default().
	Logger *slog.Logger
}

// The one contract, required whole (budget.Ledger).
var _ budget.Ledger = (*Ledger)(nil)

// Ledger is the budget.Ledger for deployments that span processes or machines: every replica of
// the server opens the same database. Each open Ledger is an owner holding a lease row,
// renewed in the background; see budget's package doc for how meters stay exact and how a dead
// owner's calls are recovered.
type Ledger struct {
	pool  *pgxpool.Pool
	owner string
	ttl   time.Duration
	log   *slog.Logger

	stop context.CancelFunc
	done chan struct{} // closed when the renewal goroutine has returned

	queue *pgQueue // tool_call_finished records waiting for the next statement (pipeline.go)

	leaseSent  atomic.Pointer[time.Time] // when the last renewal that held was sent (this clock)
	leaseSince atomic.Pointer[time.Time] // when the lease held now was taken: at Open, or back after a loss

	closeOnce sync.Once
	closeErr  error
}

// postgresSchema are the ledger's migrations (internal/pgdb): append, never edit.
var postgresSchema = []string{
	`CREATE TABLE ledger_runs (
		tenant          text        NOT NULL,
		run_id          text        NOT NULL,
		started_at      timestamptz NOT NULL DEFAULT now(),
		ended_at        timestamptz,
		calls           bigint      NOT NULL DEFAULT 0,
		transfer_bytes  bigint      NOT NULL DEFAULT 0,
		produced_bytes  bigint      NOT NULL DEFAULT 0,
		preserved_bytes bigint      NOT NULL DEFAULT 0,
		PRIMARY KEY (tenant, run_id)
	);
	CREATE TABLE ledger_executions (
		id              text        PRIMARY KEY,
		tenant          text        NOT NULL,
		run_id          text        NOT NULL,
		agent_version   text        NOT NULL DEFAULT '',
		started_at      timestamptz NOT NULL DEFAULT now(),
		ended_at        timestamptz,
		status          text        NOT NULL DEFAULT 'running',
		attachments     text,
		calls           bigint      NOT NULL DEFAULT 0,
		transfer_bytes  bigint      NOT NULL DEFAULT 0,
		produced_bytes  bigint      NOT NULL DEFAULT 0,
		preserved_bytes bigint      NOT NULL DEFAULT 0
	);
	CREATE TABLE ledger_calls (
		id              text        PRIMARY KEY,
		tenant          text        NOT NULL,
		run_id          text        NOT NULL,
		execution_id    text        NOT NULL,
		tool            text        NOT NULL,
		argument_bytes  bigint      NOT NULL,
		owner           text        NOT NULL,
		status          text        NOT NULL,
		spent           boolean     NOT NULL,
		started_at      timestamptz NOT NULL DEFAULT now(),
		finished_at     timestamptz,
		transfer_bytes  bigint      NOT NULL DEFAULT 0,
		produced_bytes  bigint      NOT NULL DEFAULT 0,
		preserved_bytes bigint      NOT NULL DEFAULT 0,
		attachments     text,
		kind            text        NOT NULL DEFAULT '',
		message         text        NOT NULL DEFAULT ''
	);
	CREATE INDEX ledger_calls_open ON ledger_calls (owner) WHERE status = 'started';
	CREATE INDEX ledger_calls_run ON ledger_calls (tenant, run_id);
	CREATE TABLE ledger_leases (
		owner       text        PRIMARY KEY,
		host        text        NOT NULL,
		pid         integer     NOT NULL,
		acquired_at timestamptz NOT NULL DEFAULT now(),
		expires_at  timestamptz NOT NULL
	);`,
	// 2: approvals by a person (binding's approval step).
	`CREATE TABLE ledger_approvals (
		id              text        PRIMARY KEY,
		tenant          text        NOT NULL,
		run_id          text        NOT NULL,
		execution_id    text        NOT NULL,
		call_id         text        NOT NULL,
		tool            text        NOT NULL,
		reason          text        NOT NULL DEFAULT '',
		owner           text        NOT NULL,
		status          text        NOT NULL,
		answered_by     text        NOT NULL DEFAULT '',
		asked_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
		decided_at      timestamptz
	);
	CREATE INDEX ledger_approvals_open ON ledger_approvals (owner) WHERE status = 'pending';
	CREATE INDEX ledger_approvals_run ON ledger_approvals (tenant, run_id);`,
	// 3: the context economy of each execution, summed per Run on read.
	`ALTER TABLE ledger_executions
		ADD COLUMN binding_bytes  bigint NOT NULL DEFAULT 0,
		ADD COLUMN returned_bytes bigint NOT NULL DEFAULT 0,
		ADD COLUMN kept_out_bytes bigint NOT NULL DEFAULT 0;
	CREATE INDEX ledger_executions_run ON ledger_executions (tenant, run_id);`,
	// 4: a summary of refusals stands for several calls (Refusal.Times).
	`ALTER TABLE ledger_calls ADD COLUMN times bigint NOT NULL DEFAULT 1;
	ALTER TABLE ledger_approvals ADD COLUMN times bigint NOT NULL DEFAULT 1;`,
	// 5: the cassettes of recorded executions (cassettes.go), kept for export.
	`CREATE TABLE ledger_cassettes (
		execution_id    text        PRIMARY KEY,
		tenant          text        NOT NULL,
		run_id          text        NOT NULL,
		data            bytea       NOT NULL,
		recorded_at     timestamptz NOT NULL DEFAULT clock_timestamp()
	);
	CREATE INDEX ledger_cassettes_run ON ledger_cassettes (tenant, run_id);
	CREATE INDEX ledger_cassettes_recorded ON ledger_cassettes (recorded_at);`,
	// 6: the shapes of tools' results, per tenant, upstream, tool and definition (observed.go).
	`CREATE TABLE ledger_observed_shapes (
		tenant          text        NOT NULL,
		upstream        text        NOT NULL,
		tool            text        NOT NULL,
		definition      text        NOT NULL,
		samples         bigint      NOT NULL DEFAULT 0,
		shape           bytea       NOT NULL DEFAULT ''::bytea,
		updated_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
		PRIMARY KEY (tenant, upstream, tool, definition)
	);
	CREATE INDEX ledger_observed_shapes_age ON ledger_observed_shapes (tenant, updated_at);`,
	// 7: calls paused on a person's approval, with their program's journal (pause.go).
	`CREATE TABLE ledger_pauses (
		id          text        PRIMARY KEY,
		tenant      text        NOT NULL,
		agent       text        NOT NULL,
		run_key     text        NOT NULL,
		hold        text        NOT NULL,
		tool        text        NOT NULL,
		arguments   text        NOT NULL,
		reason      text        NOT NULL,
		seq         bigint      NOT NULL,
		journal     text,
		resumable   boolean     NOT NULL,
		asked_at    timestamptz NOT NULL,
		expires_at  timestamptz NOT NULL,
		status      text        NOT NULL,
		answered_by text        NOT NULL DEFAULT '',
		decided_at  timestamptz,
		claimed     boolean     NOT NULL DEFAULT false,
		owner       text        NOT NULL,
		result      text
	);
	CREATE INDEX ledger_pauses_pending ON ledger_pauses (asked_at) WHERE status = 'pending';`,
	// 8: what an execution's egress proxy decided (egress.Stats.Record's JSON, held as it is; NULL without rules).
	`ALTER TABLE ledger_executions ADD COLUMN network text;`,
	// 9: a pause's arguments as the person was shown them, for the operator (budget.Pause.View).
	`ALTER TABLE ledger_pauses ADD COLUMN view text NOT NULL DEFAULT '';`,
	// 10: rehearsals' plans, their approval and the calls they covered (plans.go).
	plansSchema,
	// 11: saved programs and the executions that ran them (programs.go).
	programsSchema,
	// 12: MCP tasks (tasks.go).
	tasksMigration,
	// 13: a working task's calls so far (budget.Task.Calls).
	`ALTER TABLE ledger_tasks ADD COLUMN calls text;`,
	// 14: each Run's context economy kept on its row (runcontext.go).
	runContextMigration,
}

// Open connects to the database dsn names, applies the ledger's migrations and takes
// a lease. No error it returns contains the DSN or its password.
func Open(ctx context.Context, dsn string, opts *Options) (*Ledger, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.LeaseTTL < time.Second {
		return nil, fmt.Errorf("budget: lease TTL %v is under one second", o.LeaseTTL)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	pool, err := pgdb.Open(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("budget: postgres ledger: %w", err)
	}
	found, err := pgdb.Migrate(ctx, pool, "ledger", postgresSchema)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("budget: postgres ledger schema: %w", err)
	}
	if found > len(postgresSchema) {
		o.Logger.Info("the ledger's schema is newer than this binary's; using it as it is", "schema_version", found, "known", len(postgresSchema))
	}
	p := &Ledger{pool: pool, owner: budget.NewID("o_"), ttl: o.LeaseTTL, log: o.Logger, done: make(chan struct{}), queue: newPGQueue()}
	if err := p.relive(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("budget: postgres ledger lease: %w", err)
	}
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	p.stop = stop
	go p.renew(rctx)
	go p.flusher()
	return p, nil
}

// LeaseTTL is how long this ledger's lease lasts without renewal.
func (p *Ledger) LeaseTTL() time.Duration { return p.ttl }

// LeaseHeldUntil returns when, by this process's clock, this ledger's lease may run out at
// the earliest: two thirds of LeaseTTL after the last renewal that held was sent (a third is
// margin for the database's clock and a renewal in flight). Until then no survivor records
// its calls unknown (Meter.CallsSurelyOpen).
func (p *Ledger) LeaseHeldUntil() time.Time {
	t := p.leaseSent.Load()
	if t == nil {
		return time.Time{}
	}
	return t.Add(p.ttl * 2 / 3)
}

// LeaseHeldSince returns when, by this process's clock, the lease it holds now was taken:
// when the ledger opened, or when it was taken back after a loss (a survivor recorded this
// owner's calls then in flight unknown). A call started before it is not surely open, however
// fresh the lease (Ticket.SurelyOpen).
func (p *Ledger) LeaseHeldSince() time.Time {
	if t := p.leaseSince.Load(); t != nil {
		return *t
	}
	return time.Now()
}

// relive takes (or takes back) this owner's lease.
func (p *Ledger) relive(ctx context.Context) (err error) {
	sent := time.Now()
	// Marked before the statement: a call started while it is in flight may find the lease
	// taken back by then, and must not count it as held since before its start.
	p.leaseSince.Store(&sent)
	defer func() {
		if err == nil {
			p.leaseSent.Store(&sent)
		}
	}()
	host, _ := os.Hostname()
	_, err = p.pool.Exec(ctx, `INSERT INTO ledger_leases (owner, host, pid, expires_at)
		VALUES ($1, $2, $3, now() + make_interval(secs => $4))
		ON CONFLICT (owner) DO UPDATE SET expires_at = EXCLUDED.expires_at`,
		p.owner, host, os.Getpid(), p.ttl.Seconds())
	return err
}

// renew extends the lease every ttl/3 until ctx ends. A lease found gone was taken by a
// survivor's Recover (this process stalled past its lease): its calls then in flight were
// recorded unknown, and it takes a fresh lease for the calls to come.
func (p *Ledger) renew(ctx context.Context) {
	defer close(p.done)
	t := time.NewTicker(p.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, p.ttl/3)
		sent := time.Now()
		tag, err := p.pool.Exec(rctx, `UPDATE ledger_leases SET expires_at = now() + make_interval(secs => $2) WHERE owner = $1`,
			p.owner, p.ttl.Seconds())
		if err == nil && tag.RowsAffected() == 1 {
			p.leaseSent.Store(&sent)
		}
		if err == nil && tag.RowsAffected() == 0 {
			p.log.Warn("run ledger lease was lost: this process did not renew it in time, so its calls then in flight were recorded unknown; taking a new one",
				"owner", p.owner)
			err = p.relive(rctx)
		}
		cancel()
		if err != nil && ctx.Err() == nil {
			p.log.Warn("run ledger lease not renewed", "owner", p.owner, "err", err)
		}
	}
}

// Close stops renewing the lease and gives it up, so a survivor's next Recover records the
// calls still started by this ledger as unknown; then it closes the pool.
func (p *Ledger) Close() error {
	p.closeOnce.Do(func() {
		p.closeQueue()
		p.stop()
		<-p.done
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := p.pool.Exec(ctx, `DELETE FROM ledger_leases WHERE owner = $1`, p.owner)
		p.pool.Close()
		if err != nil {
			p.closeErr = fmt.Errorf("budget: giving up the ledger lease: %w", err)
		}
	})
	return p.closeErr
}

// errLeaseLost: a call was about to be started under a lease that had expired or been taken.
var errLeaseLost = errors.New("budget: ledger lease lost")

// retry runs fn again after a deadlock or serialization failure (PostgreSQL rolled the whole
// statement or transaction back), and after taking back a lost lease.
func (p *Ledger) retry(ctx context.Context, fn func() error) error {
	var err error
	for range 4 {
		err = fn()
		switch {
		case errors.Is(err, errLeaseLost):
			p.log.Warn("run ledger lease was lost before a call could start; taking a new one", "owner", p.owner)
			if rerr := p.relive(ctx); rerr != nil {
				return errors.Join(err, rerr)
			}
		case pgdb.Retryable(err):
		default:
			return err
		}
	}
	return err
}

func (p *Ledger) StartRun(ctx context.Context, run budget.RunRef) error {
	_, err := p.pool.Exec(ctx, `INSERT INTO ledger_runs (tenant, run_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, run.Tenant, run.ID)
	return wrapPG(err)
}

func (p *Ledger) EndRun(ctx context.Context, run budget.RunRef) error {
	tag, err := p.pool.Exec(ctx, `UPDATE ledger_runs SET ended_at = now() WHERE tenant = $1 AND run_id = $2`, run.Tenant, run.ID)
	if err == nil && tag.RowsAffected() == 0 {
		return budget.ErrNotFound
	}
	return wrapPG(err)
}

// startExecution records an execution's start, making its Run if need be, and answers the
// Run's usage in the same statement: the Run's row as this statement made it, or as it was.
const startExecution = `WITH r AS (
		INSERT INTO ledger_runs (tenant, run_id) VALUES ($1, $2) ON CONFLICT DO NOTHING
		RETURNING calls, transfer_bytes, produced_bytes, preserved_bytes
	), x AS (
		INSERT INTO ledger_executions (id, tenant, run_id, agent_version) VALUES ($3, $1, $2, $4)
	)
	SELECT calls, transfer_bytes, produced_bytes, preserved_bytes FROM r
	UNION ALL
	SELECT calls, transfer_bytes, produced_bytes, preserved_bytes FROM ledger_runs
	WHERE tenant = $1 AND run_id = $2 AND NOT EXISTS (SELECT 1 FROM r)`

// StartExecution sends the finishes queued (FinishCallLater) ahead of the start, in its round
// trip, so the usage it answers counts them, as RunUsage's would (docs/design.md §19.5).
func (p *Ledger) StartExecution(ctx context.Context, run budget.RunRef, id, agentVersion string) (budget.Usage, error) {
	var u budget.Usage
	args := []any{run.Tenant, run.ID, id, agentVersion}
	scan := func(r pgx.Row) error {
		u = budget.Usage{}
		err := r.Scan(&u.Calls, &u.TransferBytes, &u.ProducedBytes, &u.PreservedBytes)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // another replica made the Run after this statement's snapshot: nothing used yet
		}
		return err
	}
	if ops := p.takeFinishes(); len(ops) > 0 {
		err := p.sendFinishes(ctx, ops, func(b *pgx.Batch) func(pgx.BatchResults) error {
			b.Queue(startExecution, args...)
			return func(br pgx.BatchResults) error { return scan(br.QueryRow()) }
		})
		if err == nil {
			return u, nil
		}
		// The batch was rolled back whole; the finishes were written on their own: the start
		// goes alone.
	}
	if err := p.retry(ctx, func() error { return scan(p.pool.QueryRow(ctx, startExecution, args...)) }); err != nil {
		return budget.Usage{}, wrapPG(err)
	}
	return u, nil
}

// EndExecution ends the execution and reads its Run's context economy, which the trigger of
// migration 14 (runContextMigration) has just counted the end in, in one round trip and one
// transaction.
func (p *Ledger) EndExecution(ctx context.Context, end budget.ExecutionEnd) (telemetry.Context, error) {
	c, u := end.Context, end.Usage
	var run telemetry.Context
	err := p.retry(ctx, func() error {
		b := &pgx.Batch{}
		// The Run's row first, as finishCall takes them, before the trigger takes it after the
		// execution's: a finish flushed while its execution ends cannot deadlock with the end.
		b.Queue(`SELECT 1 FROM ledger_runs r JOIN ledger_executions e ON r.tenant = e.tenant AND r.run_id = e.run_id
			WHERE e.id = $1 FOR UPDATE OF r`, end.ID)
		b.Queue(`UPDATE ledger_executions SET ended_at = now(), status = $2, attachments = $3,
			binding_bytes = $4, returned_bytes = $5, kept_out_bytes = $6, network = $7,
			calls = $8, transfer_bytes = $9, produced_bytes = $10, preserved_bytes = $11 WHERE id = $1`,
			end.ID, end.Status, nullJSON(end.Attachments), c.BindingBytes, c.ReturnedBytes, c.KeptOutBytes,
			nullJSON(end.Network), u.Calls, u.TransferBytes, u.ProducedBytes, u.PreservedBytes)
		b.Queue(`SELECT r.binding_bytes, r.returned_bytes, r.kept_out_bytes FROM ledger_executions e
			JOIN ledger_runs r ON r.tenant = e.tenant AND r.run_id = e.run_id WHERE e.id = $1`, end.ID)
		br := p.pool.SendBatch(ctx, b)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return err
		}
		tag, err := br.Exec()
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return budget.ErrNotFound
		}
		run = telemetry.Context{}
		err = br.QueryRow().Scan(&run.BindingBytes, &run.ReturnedBytes, &run.KeptOutBytes)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) { // no rows: a Run without a row has no sums
			return err
		}
		return br.Close() // the batch's implicit transaction commits here: its error is the end's
	})
	if err != nil {
		return telemetry.Context{}, wrapPG(err)
	}
	return run, nil
}

// admitCall is StartCall's one round trip for a metered call: under a key-share lock on this
// owner's live lease, one conditional UPDATE of the Run's row both checks every meter and
// counts the call (the row lock makes racing admissions, from any replica, take turns, and
// each re-checks the row as the previous one left it), and the call and its execution's count
// are written in the same statement. No row back: the Run is spent, missing, or the lease is
// gone; admitSlow tells which.
const admitCall = `WITH lease AS (
		SELECT owner FROM ledger_leases WHERE owner = $7 AND expires_at > now() FOR KEY SHARE
	), admit AS (
		UPDATE ledger_runs SET calls = calls + 1
		WHERE tenant = $1 AND run_id = $2 AND EXISTS (SELECT 1 FROM lease)
			AND calls < $8 AND transfer_bytes < $9 AND produced_bytes < $10 AND preserved_bytes < $11
		RETURNING calls, transfer_bytes, produced_bytes, preserved_bytes
	), ex AS (
		UPDATE ledger_executions SET calls = ledger_executions.calls + 1 FROM admit WHERE id = $3
	), ins AS (
		INSERT INTO ledger_calls (id, tenant, run_id, execution_id, tool, argument_bytes, owner, status, spent)
		SELECT $4, $1, $2, $3, $5, $6, $7, 'started', true FROM admit
	)
	SELECT calls, transfer_bytes, produced_bytes, preserved_bytes FROM admit`

func (p *Ledger) StartCall(ctx context.Context, c budget.CallStart, runLimits budget.Limits) (budget.Usage, error) {
	var after budget.Usage
	var refusal *failure.Error
	ceil := budget.RunCeiling(runLimits)
	admitArgs := []any{c.Run.Tenant, c.Run.ID, c.ExecutionID, c.ID, c.Tool, c.ArgumentBytes, p.owner,
		ceil.Calls, ceil.TransferBytes, ceil.ProducedBytes, ceil.PreservedBytes}
	scanAdmit := func(r pgx.Row) error {
		return r.Scan(&after.Calls, &after.TransferBytes, &after.ProducedBytes, &after.PreservedBytes)
	}
	// The queued tool_call_finished records go first, in the same round trip and commit.
	piped := false
	if ops := p.takeFinishes(); len(ops) > 0 && c.ExecutionID != "" {
		err := p.sendFinishes(ctx, ops, func(b *pgx.Batch) func(pgx.BatchResults) error {
			b.Queue(admitCall, admitArgs...)
			return func(br pgx.BatchResults) error { return scanAdmit(br.QueryRow()) }
		})
		switch {
		case err == nil:
			return after, nil
		case errors.Is(err, pgx.ErrNoRows):
			piped = true // committed: the Run is spent, missing, or the lease gone; see below
		}
	} else if len(ops) > 0 {
		_ = p.sendFinishes(ctx, ops, nil)
	}
	err := p.retry(ctx, func() error {
		refusal = nil
		if c.ExecutionID != "" {
			err := pgx.ErrNoRows
			if !piped {
				err = scanAdmit(p.pool.QueryRow(ctx, admitCall, admitArgs...))
			}
			piped = false
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		var err error
		after, refusal, err = p.admitSlow(ctx, c, runLimits)
		return err
	})
	if err != nil {
		return budget.Usage{}, wrapPG(err)
	}
	if refusal != nil {
		return after, refusal
	}
	return after, nil
}

// admitSlow is StartCall as a transaction of several statements, for a direct call, and for
// a metered call admitCall did not admit: it checks the lease, makes the Run if need be, locks
// its row, and then refuses (recording the refusal) or admits exactly as SQLite does.
func (p *Ledger) admitSlow(ctx context.Context, c budget.CallStart, runLimits budget.Limits) (after budget.Usage, refusal *failure.Error, err error) {
	err = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		var owner string
		err := tx.QueryRow(ctx, `SELECT owner FROM ledger_leases WHERE owner = $1 AND expires_at > now() FOR KEY SHARE`, p.owner).Scan(&owner)
		if errors.Is(err, pgx.ErrNoRows) {
			return errLeaseLost
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO ledger_runs (tenant, run_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, c.Run.Tenant, c.Run.ID); err != nil {
			return err
		}
		u, err := pgRunUsage(ctx, tx, c.Run, true)
		if err != nil {
			return err
		}
		metered := c.ExecutionID != ""
		if metered {
			if refusal = budget.RunRefusal(u, runLimits); refusal != nil {
				after = u
				return p.insertCall(ctx, tx, budget.Refusal{CallStart: c, Kind: string(refusal.Kind), Message: refusal.Message}, budget.Refused)
			}
		}
		if err := p.insertCall(ctx, tx, budget.Refusal{CallStart: c}, budget.Started); err != nil {
			return err
		}
		if metered {
			if _, err := tx.Exec(ctx, `UPDATE ledger_runs SET calls = calls + 1 WHERE tenant = $1 AND run_id = $2`, c.Run.Tenant, c.Run.ID); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE ledger_executions SET calls = calls + 1 WHERE id = $1`, c.ExecutionID); err != nil {
				return err
			}
			u.Calls++
		}
		after = u
		return nil
	})
	return after, refusal, err
}

// execer is a pool or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// insertCall writes the record of r's call: started (r's Kind and Message empty), or refused.
func (p *Ledger) insertCall(ctx context.Context, q execer, r budget.Refusal, st budget.CallStatus) error {
	c := r.CallStart
	_, err := q.Exec(ctx, `INSERT INTO ledger_calls (id, tenant, run_id, execution_id, tool, argument_bytes, owner, status, spent,
		finished_at, kind, message, times)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, CASE WHEN $8 = 'started' THEN NULL ELSE now() END, $10, $11, $12)`,
		c.ID, c.Run.Tenant, c.Run.ID, c.ExecutionID, c.Tool, c.ArgumentBytes, p.owner, string(st), st == budget.Started, r.Kind, r.Message, times(r.Times))
	return err
}

func (p *Ledger) RefuseCall(ctx context.Context, r budget.Refusal) error {
	return wrapPG(p.retry(ctx, func() error {
		return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO ledger_runs (tenant, run_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, r.Run.Tenant, r.Run.ID); err != nil {
				return err
			}
			return p.insertCall(ctx, tx, r, budget.Refused)
		})
	}))
}

// finishCall ends a started call and adds its bytes to its Run and execution in one
// statement; the Run's row is updated before the execution's (each CTE reads the one before),
// the order every statement here takes its row locks in.
const finishCall = `WITH fin AS (
		UPDATE ledger_calls SET status = $2, finished_at = now(), transfer_bytes = $3, produced_bytes = $4,
			preserved_bytes = $5, attachments = $6, kind = $7, message = $8
		WHERE id = $1 AND status = 'started'
		RETURNING tenant, run_id, execution_id
	), r AS (
		UPDATE ledger_runs SET transfer_bytes = ledger_runs.transfer_bytes + $3, produced_bytes = ledger_runs.produced_bytes + $4,
			preserved_bytes = ledger_runs.preserved_bytes + $5
		FROM fin WHERE ledger_runs.tenant = fin.tenant AND ledger_runs.run_id = fin.run_id AND fin.execution_id <> ''
		RETURNING fin.execution_id
	), e AS (
		UPDATE ledger_executions SET transfer_bytes = ledger_executions.transfer_bytes + $3,
			produced_bytes = ledger_executions.produced_bytes + $4, preserved_bytes = ledger_executions.preserved_bytes + $5
		FROM r WHERE ledger_executions.id = r.execution_id
	)
	SELECT count(*) FROM fin`

func (p *Ledger) FinishCall(ctx context.Context, f budget.CallFinish) error {
	if !f.Status.Finishing() {
		return fmt.Errorf("budget: %q does not finish a call", f.Status)
	}
	var n int
	err := p.retry(ctx, func() error {
		return p.pool.QueryRow(ctx, finishCall, finishArgs(f)...).Scan(&n)
	})
	if err != nil {
		return wrapPG(err)
	}
	if n == 1 {
		return nil
	}
	return p.notFinished(ctx, f.ID)
}

// charge adds bytes to a Run, making it if need be, and then to the execution $6 when set.
const charge = `WITH r AS (
		INSERT INTO ledger_runs AS l (tenant, run_id, transfer_bytes, produced_bytes, preserved_bytes) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (tenant, run_id) DO UPDATE SET transfer_bytes = l.transfer_bytes + $3,
			produced_bytes = l.produced_bytes + $4, preserved_bytes = l.preserved_bytes + $5
		RETURNING 1
	)
	UPDATE ledger_executions SET transfer_bytes = transfer_bytes + $3, produced_bytes = produced_bytes + $4,
		preserved_bytes = preserved_bytes + $5
	FROM r WHERE id = $6`

func (p *Ledger) Charge(ctx context.Context, run budget.RunRef, execID string, u budget.Usage) error {
	if u.Calls != 0 {
		return errors.New("budget: Charge cannot count calls")
	}
	return wrapPG(p.retry(ctx, func() error {
		_, err := p.pool.Exec(ctx, charge, run.Tenant, run.ID, u.TransferBytes, u.ProducedBytes, u.PreservedBytes, execID)
		return err
	}))
}

func pgRunUsage(ctx context.Context, q execer, run budget.RunRef, lock bool) (budget.Usage, error) {
	query := `SELECT calls, transfer_bytes, produced_bytes, preserved_bytes FROM ledger_runs WHERE tenant = $1 AND run_id = $2`
	if lock {
		query += ` FOR UPDATE`
	}
	var u budget.Usage
	err := q.QueryRow(ctx, query, run.Tenant, run.ID).Scan(&u.Calls, &u.TransferBytes, &u.ProducedBytes, &u.PreservedBytes)
	if errors.Is(err, pgx.ErrNoRows) {
		return budget.Usage{}, nil
	}
	return u, err
}

func (p *Ledger) RunUsage(ctx context.Context, run budget.RunRef) (budget.Usage, error) {
	_ = p.Flush(ctx)
	u, err := pgRunUsage(ctx, p.pool, run, false)
	if err != nil {
		return budget.Usage{}, fmt.Errorf("budget: run usage: %w", err)
	}
	return u, nil
}

func scanPGCall(r pgx.Row) (budget.CallRecord, error) {
	var c budget.CallRecord
	var status string
	var finished *time.Time
	var att *string
	err := r.Scan(&c.ID, &c.Run.Tenant, &c.Run.ID, &c.ExecutionID, &c.Tool, &c.ArgumentBytes, &status, &c.Spent,
		&c.StartedAt, &finished, &c.Usage.TransferBytes, &c.Usage.ProducedBytes, &c.Usage.PreservedBytes, &att, &c.Kind, &c.Message, &c.Times)
	if err != nil {
		return budget.CallRecord{}, err
	}
	c.Status = budget.CallStatus(status)
	if finished != nil {
		c.FinishedAt = *finished
	}
	if att != nil {
		c.Attachments = []byte(*att)
	}
	if c.Spent {
		c.Usage.Calls = 1
	}
	return c, nil
}

func (p *Ledger) Call(ctx context.Context, id string) (budget.CallRecord, error) {
	_ = p.Flush(ctx)
	c, err := scanPGCall(p.pool.QueryRow(ctx, `SELECT `+callColumns+` FROM ledger_calls WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return budget.CallRecord{}, fmt.Errorf("%w: call %s", budget.ErrNotFound, id)
	}
	return c, wrapPG(err)
}

func (p *Ledger) Calls(ctx context.Context, run budget.RunRef) ([]budget.CallRecord, error) {
	_ = p.Flush(ctx)
	rows, err := p.pool.Query(ctx, `SELECT `+callColumns+` FROM ledger_calls WHERE tenant = $1 AND run_id = $2
		ORDER BY started_at, id`, run.Tenant, run.ID)
	if err != nil {
		return nil, wrapPG(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (budget.CallRecord, error) { return scanPGCall(r) })
	return out, wrapPG(err)
}

func (p *Ledger) AskApproval(ctx context.Context, a budget.ApprovalAsk) error {
	if err := a.Check(); err != nil {
		return err
	}
	return wrapPG(p.retry(ctx, func() error {
		_, err := p.pool.Exec(ctx, `WITH r AS (INSERT INTO ledger_runs (tenant, run_id) VALUES ($1, $2) ON CONFLICT DO NOTHING)
			INSERT INTO ledger_approvals (id, tenant, run_id, execution_id, call_id, tool, reason, owner, status, decided_at, times)
			VALUES ($3, $1, $2, $4, $5, $6, $7, $8, $9, CASE WHEN $9 = 'pending' THEN NULL ELSE clock_timestamp() END, $10)`,
			a.Run.Tenant, a.Run.ID, a.ID, a.ExecutionID, a.CallID, a.Tool, a.Reason, p.owner, string(a.Status), times(a.Times))
		return err
	}))
}

func (p *Ledger) DecideApproval(ctx context.Context, d budget.ApprovalDecision) error {
	if !d.Status.Deciding() {
		return fmt.Errorf("budget: %q does not decide an approval", d.Status)
	}
	tag, err := p.pool.Exec(ctx, `UPDATE ledger_approvals SET status = $2, answered_by = $3, decided_at = clock_timestamp()
		WHERE id = $1 AND status = 'pending'`, d.ID, string(d.Status), d.AnsweredBy)
	if err != nil {
		return wrapPG(err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	var status string
	err = p.pool.QueryRow(ctx, `SELECT status FROM ledger_approvals WHERE id = $1`, d.ID).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: approval %s", budget.ErrNotFound, d.ID)
	}
	if err != nil {
		return wrapPG(err)
	}
	return fmt.Errorf("%w: approval %s is %s", budget.ErrAlreadyFinished, d.ID, status)
}

func (p *Ledger) Approvals(ctx context.Context, run budget.RunRef) ([]budget.ApprovalRecord, error) {
	rows, err := p.pool.Query(ctx, `SELECT `+approvalColumns+` FROM ledger_approvals WHERE tenant = $1 AND run_id = $2
		ORDER BY asked_at, id`, run.Tenant, run.ID)
	if err != nil {
		return nil, wrapPG(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (budget.ApprovalRecord, error) {
		var a budget.ApprovalRecord
		var status string
		var decided *time.Time
		err := r.Scan(&a.ID, &a.Run.Tenant, &a.Run.ID, &a.ExecutionID, &a.CallID, &a.Tool, &a.Reason, &status,
			&a.AnsweredBy, &a.AskedAt, &decided, &a.Times)
		a.Status = budget.ApprovalStatus(status)
		if decided != nil {
			a.DecidedAt = *decided
		}
		return a, err
	})
	return out, wrapPG(err)
}

// Recover, for PostgreSQL: an owner is gone when its lease has expired or is absent (it
// closed). In one transaction it first deletes the expired leases, waiting for calls those
// owners are starting at that moment (they hold a key-share lock on their lease) to commit,
// and then, in a statement that sees those calls, marks every started call of a gone owner
// unknown. A row is updated once however many replicas recover at the same time.
func (p *Ledger) Recover(ctx context.Context) ([]budget.CallRecord, error) {
	_ = p.Flush(ctx)
	var out []budget.CallRecord
	err := p.retry(ctx, func() error {
		out = nil
		return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `DELETE FROM ledger_leases WHERE expires_at < now() AND owner <> $1 RETURNING owner`, p.owner)
			if err != nil {
				return err
			}
			expired, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE ledger_approvals a SET status = 'unknown', decided_at = clock_timestamp()
				WHERE a.status = 'pending' AND a.owner <> $1
					AND (a.owner = ANY($2) OR NOT EXISTS (SELECT 1 FROM ledger_leases l WHERE l.owner = a.owner))`,
				p.owner, expired); err != nil {
				return err
			}
			if err := failLostTasks(ctx, tx, p.owner, expired); err != nil {
				return err
			}
			rows, err = tx.Query(ctx, `UPDATE ledger_calls c SET status = 'unknown', finished_at = now(),
				message = 'the host stopped while the call was in flight; it is counted and not replayed'
				WHERE c.status = 'started' AND c.owner <> $1
					AND (c.owner = ANY($2) OR NOT EXISTS (SELECT 1 FROM ledger_leases l WHERE l.owner = c.owner))
				RETURNING `+callColumns, p.owner, expired)
			if err != nil {
				return err
			}
			out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (budget.CallRecord, error) { return scanPGCall(r) })
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("budget: recover: %w", err)
	}
	budget.SortByStart(out)
	return out, nil
}

// wrapPG leaves nil and the ledger's own errors alone and prefixes the rest.
func wrapPG(err error) error {
	if err == nil || errors.Is(err, budget.ErrNotFound) || errors.Is(err, budget.ErrAlreadyFinished) {
		return err
	}
	var fe *failure.Error
	if errors.As(err, &fe) {
		return err
	}
	return fmt.Errorf("budget: postgres ledger: %w", err)
}

// The columns a call and an approval are read from, in scanPGCall's and scanPGApproval's order.
const (
	callColumns = `id, tenant, run_id, execution_id, tool, argument_bytes, status, spent, started_at,
	finished_at, transfer_bytes, produced_bytes, preserved_bytes, attachments, kind, message, times`
	approvalColumns = `id, tenant, run_id, execution_id, call_id, tool, reason, status, answered_by, asked_at, decided_at, times`
)

// times is a record's Times as stored: 0 means 1.
func times(n int64) int64 { return max(n, 1) }

func nullJSON(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}
