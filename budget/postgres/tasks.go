package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

// tasksMigration is the table of MCP tasks (budget.Tasks), the ledger's migration 12.
const tasksMigration = `CREATE TABLE ledger_tasks (
		id               text        PRIMARY KEY,
		tenant           text        NOT NULL,
		agent            text        NOT NULL,
		run_key          text        NOT NULL,
		execution_id     text        NOT NULL DEFAULT '',
		status           text        NOT NULL,
		message          text        NOT NULL DEFAULT '',
		created_at       timestamptz NOT NULL,
		updated_at       timestamptz NOT NULL,
		ttl_ms           bigint      NOT NULL,
		poll_interval_ms bigint      NOT NULL,
		result           text,
		owner            text        NOT NULL
	);
	CREATE INDEX ledger_tasks_tenant ON ledger_tasks (tenant, agent, created_at);
	CREATE INDEX ledger_tasks_open ON ledger_tasks (owner) WHERE status IN ('working', 'input_required');`

func (p *Ledger) SaveTask(ctx context.Context, t budget.Task) error {
	_, err := p.pool.Exec(ctx, `INSERT INTO ledger_tasks
		(id, tenant, agent, run_key, status, message, created_at, updated_at, ttl_ms, poll_interval_ms, owner)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8, $9, $10)`,
		t.ID, t.Tenant, t.Agent, t.Run, string(t.Status), t.Message, t.CreatedAt, t.TTL.Milliseconds(), t.PollInterval.Milliseconds(), p.owner)
	return wrapPG(err)
}

const taskColumns = `id, tenant, agent, run_key, execution_id, status, message, created_at, updated_at, ttl_ms, poll_interval_ms, result, owner, calls`

func scanTask(r pgx.Row) (budget.Task, error) {
	var t budget.Task
	var status string
	var ttl, poll int64
	var result, calls *string
	err := r.Scan(&t.ID, &t.Tenant, &t.Agent, &t.Run, &t.ExecutionID, &status, &t.Message, &t.CreatedAt, &t.UpdatedAt, &ttl, &poll, &result, &t.Owner, &calls)
	if result != nil {
		t.Result = json.RawMessage(*result)
	}
	if calls != nil {
		t.Calls = json.RawMessage(*calls)
	}
	t.Status = budget.TaskStatus(status)
	t.TTL, t.PollInterval = time.Duration(ttl)*time.Millisecond, time.Duration(poll)*time.Millisecond
	return t, err
}

func (p *Ledger) Task(ctx context.Context, tenant, id string) (budget.Task, error) {
	t, err := scanTask(p.pool.QueryRow(ctx, `SELECT `+taskColumns+` FROM ledger_tasks WHERE tenant = $1 AND id = $2`, tenant, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return t, fmt.Errorf("%w: task %s", budget.ErrNotFound, id)
	}
	return t, wrapPG(err)
}

func (p *Ledger) ListTasks(ctx context.Context, tenant, agent string, limit int) ([]budget.Task, error) {
	rows, err := p.pool.Query(ctx, `SELECT `+taskColumns+` FROM ledger_tasks WHERE tenant = $1 AND agent = $2
		ORDER BY created_at DESC, id LIMIT $3`, tenant, agent, limit)
	if err != nil {
		return nil, wrapPG(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (budget.Task, error) { return scanTask(r) })
	return out, wrapPG(err)
}

func (p *Ledger) UpdateTask(ctx context.Context, tenant, id string, status budget.TaskStatus, message string, result json.RawMessage) (budget.Task, error) {
	var res *string
	if result != nil {
		r := string(result)
		res = &r
	}
	tag, err := p.pool.Exec(ctx, `UPDATE ledger_tasks SET status = $3, message = $4, result = coalesce($5, result), updated_at = clock_timestamp()
		WHERE tenant = $1 AND id = $2 AND (status IN ('working', 'input_required')
			OR (status = 'cancelled' AND $3 = 'cancelled' AND result IS NULL AND $5::text IS NOT NULL AND owner = $6))`,
		tenant, id, string(status), message, res, p.owner)
	if err != nil {
		return budget.Task{}, wrapPG(err)
	}
	t, err := p.Task(ctx, tenant, id)
	if err == nil && tag.RowsAffected() != 1 {
		err = fmt.Errorf("%w: task %s is %s", budget.ErrAlreadyFinished, id, t.Status)
	}
	return t, err
}

func (p *Ledger) SetTaskCalls(ctx context.Context, tenant, id string, calls json.RawMessage) error {
	_, err := p.pool.Exec(ctx, `UPDATE ledger_tasks SET calls = $3 WHERE tenant = $1 AND id = $2 AND status IN ('working', 'input_required')`,
		tenant, id, string(calls))
	return wrapPG(err)
}

func (p *Ledger) SetTaskExecution(ctx context.Context, tenant, id, executionID string) error {
	tag, err := p.pool.Exec(ctx, `UPDATE ledger_tasks SET execution_id = $3 WHERE tenant = $1 AND id = $2`, tenant, id, executionID)
	if err == nil && tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: task %s", budget.ErrNotFound, id)
	}
	return wrapPG(err)
}

// failLostTasks fails the tasks still going on whose owner is gone: one of expired, or one
// holding no lease (Recover).
func failLostTasks(ctx context.Context, tx pgx.Tx, self string, expired []string) error {
	_, err := tx.Exec(ctx, `UPDATE ledger_tasks t SET status = 'failed', message = $3, updated_at = clock_timestamp()
		WHERE t.status IN ('working', 'input_required') AND t.owner <> $1
			AND (t.owner = ANY($2) OR NOT EXISTS (SELECT 1 FROM ledger_leases l WHERE l.owner = t.owner))`,
		self, expired, budget.TaskLost)
	return err
}

func (p *Ledger) DropTasksBefore(ctx context.Context, t time.Time) (int, error) {
	tag, err := p.pool.Exec(ctx, `DELETE FROM ledger_tasks WHERE created_at < $1`, t)
	if err != nil {
		return 0, wrapPG(err)
	}
	return int(tag.RowsAffected()), nil
}
