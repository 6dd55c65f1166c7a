package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

func (s *Ledger) PutCassette(ctx context.Context, c budget.Cassette) error {
	return s.write(ctx, func(tx *stmtTx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO cassettes (execution_id, tenant, run_id, data, recorded_at)
			VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (execution_id) DO UPDATE SET data = excluded.data, recorded_at = excluded.recorded_at`,
			c.ExecutionID, c.Run.Tenant, c.Run.ID, c.Data, now())
		return err
	})
}

const cassetteColumns = `execution_id, tenant, run_id, data, recorded_at`

func (s *Ledger) Cassette(ctx context.Context, executionID string) (budget.Cassette, error) {
	c, err := scanCassette(s.db.QueryRowContext(ctx, `SELECT `+cassetteColumns+` FROM cassettes WHERE execution_id = ?`, executionID))
	if errors.Is(err, sql.ErrNoRows) {
		return budget.Cassette{}, fmt.Errorf("%w: no cassette of execution %s", budget.ErrNotFound, executionID)
	}
	return c, err
}

func (s *Ledger) RunCassettes(ctx context.Context, run budget.RunRef) ([]budget.Cassette, error) {
	out, err := queryAll(ctx, s.db, "cassettes", scanCassette, `SELECT `+cassetteColumns+` FROM cassettes
		WHERE tenant = ? AND run_id = ? ORDER BY recorded_at, rowid`, run.Tenant, run.ID)
	if out == nil && err == nil {
		out = []budget.Cassette{}
	}
	return out, err
}

func (s *Ledger) SweepCassettes(ctx context.Context, cutoff time.Time) (int, error) {
	var n int64
	err := s.write(ctx, func(tx *stmtTx) error {
		r, err := tx.ExecContext(ctx, `DELETE FROM cassettes WHERE recorded_at < ?`, cutoff.UnixNano())
		if err != nil {
			return err
		}
		n, err = r.RowsAffected()
		return err
	})
	return int(n), err
}

func scanCassette(r scanner) (budget.Cassette, error) {
	var c budget.Cassette
	var at int64
	if err := r.Scan(&c.ExecutionID, &c.Run.Tenant, &c.Run.ID, &c.Data, &at); err != nil {
		return c, err
	}
	c.RecordedAt = time.Unix(0, at)
	return c, nil
}
