package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

// tasksSchema is the table of MCP tasks (budget.Tasks), applied with schema from version 11.
const tasksSchema = `
CREATE TABLE IF NOT EXISTS tasks (
	id               TEXT    PRIMARY KEY,
	tenant           TEXT    NOT NULL,
	agent            TEXT    NOT NULL,
	run_key          TEXT    NOT NULL,
	execution_id     TEXT    NOT NULL DEFAULT '',
	status           TEXT    NOT NULL,
	message          TEXT    NOT NULL DEFAULT '',
	created_at       INTEGER NOT NULL,
	updated_at       INTEGER NOT NULL,
	ttl_ms           INTEGER NOT NULL,
	poll_interval_ms INTEGER NOT NULL,
	result           TEXT,
	owner            TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_tenant ON tasks (tenant, agent, created_at);
CREATE INDEX IF NOT EXISTS tasks_open ON tasks (owner) WHERE status IN ('working', 'input_required');
`

func (s *Ledger) SaveTask(ctx context.Context, t budget.Task) error {
	return s.write(ctx, func(tx *stmtTx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO tasks
			(id, tenant, agent, run_key, status, message, created_at, updated_at, ttl_ms, poll_interval_ms, owner)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			t.ID, t.Tenant, t.Agent, t.Run, string(t.Status), t.Message, t.CreatedAt.UnixNano(), t.CreatedAt.UnixNano(),
			t.TTL.Milliseconds(), t.PollInterval.Milliseconds(), s.lock.ID())
		return err
	})
}

const taskColumns = `id, tenant, agent, run_key, execution_id, status, message, created_at, updated_at, ttl_ms, poll_interval_ms, result, owner, calls`

func scanTask(r scanner) (budget.Task, error) {
	var t budget.Task
	var status string
	var created, updated, ttl, poll int64
	var result, calls sql.NullString
	if err := r.Scan(&t.ID, &t.Tenant, &t.Agent, &t.Run, &t.ExecutionID, &status, &t.Message, &created, &updated, &ttl, &poll, &result, &t.Owner, &calls); err != nil {
		return t, err
	}
	t.Status, t.Result, t.Calls = budget.TaskStatus(status), nullBytes(result), nullBytes(calls)
	t.CreatedAt, t.UpdatedAt = time.Unix(0, created), time.Unix(0, updated)
	t.TTL, t.PollInterval = time.Duration(ttl)*time.Millisecond, time.Duration(poll)*time.Millisecond
	return t, nil
}

func (s *Ledger) Task(ctx context.Context, tenant, id string) (budget.Task, error) {
	t, err := scanTask(s.db.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM tasks WHERE tenant = ? AND id = ?`, tenant, id))
	if errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("%w: task %s", budget.ErrNotFound, id)
	}
	return t, err
}

func (s *Ledger) ListTasks(ctx context.Context, tenant, agent string, limit int) ([]budget.Task, error) {
	return queryAll(ctx, s.db, "tasks", scanTask, `SELECT `+taskColumns+` FROM tasks WHERE tenant = ? AND agent = ?
		ORDER BY created_at DESC, id LIMIT ?`, tenant, agent, limit)
}

func (s *Ledger) UpdateTask(ctx context.Context, tenant, id string, status budget.TaskStatus, message string, result json.RawMessage) (budget.Task, error) {
	var res any
	if result != nil {
		res = string(result)
	}
	n, err := s.affect(ctx, `UPDATE tasks SET status = ?1, message = ?2, result = coalesce(?3, result), updated_at = ?4
		WHERE tenant = ?5 AND id = ?6 AND (status IN ('working', 'input_required')
			OR (status = 'cancelled' AND ?1 = 'cancelled' AND result IS NULL AND ?3 IS NOT NULL AND owner = ?7))`,
		string(status), message, res, now(), tenant, id, s.lock.ID())
	if err != nil {
		return budget.Task{}, err
	}
	t, err := s.Task(ctx, tenant, id)
	if err == nil && n != 1 {
		err = fmt.Errorf("%w: task %s is %s", budget.ErrAlreadyFinished, id, t.Status)
	}
	return t, err
}

func (s *Ledger) SetTaskCalls(ctx context.Context, tenant, id string, calls json.RawMessage) error {
	_, err := s.affect(ctx, `UPDATE tasks SET calls = ? WHERE tenant = ? AND id = ? AND status IN ('working', 'input_required')`,
		string(calls), tenant, id)
	return err
}

func (s *Ledger) SetTaskExecution(ctx context.Context, tenant, id, executionID string) error {
	return s.write(ctx, func(tx *stmtTx) error {
		return mustAffect(tx.ExecContext(ctx, `UPDATE tasks SET execution_id = ? WHERE tenant = ? AND id = ?`, executionID, tenant, id))
	})
}

// failLostTasks fails the tasks of owner o still going on (Recover: o is gone).
func failLostTasks(ctx context.Context, tx *stmtTx, o string) error {
	_, err := tx.ExecContext(ctx, `UPDATE tasks SET status = 'failed', message = ?, updated_at = ?
		WHERE owner = ? AND status IN ('working', 'input_required')`, budget.TaskLost, now(), o)
	return err
}

func (s *Ledger) DropTasksBefore(ctx context.Context, t time.Time) (int, error) {
	return s.affect(ctx, `DELETE FROM tasks WHERE created_at < ?`, t.UnixNano())
}

// affect runs one statement that writes and returns how many rows it changed.
func (s *Ledger) affect(ctx context.Context, query string, args ...any) (int, error) {
	var n int64
	err := s.write(ctx, func(tx *stmtTx) error {
		r, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		n, err = r.RowsAffected()
		return err
	})
	return int(n), err
}
