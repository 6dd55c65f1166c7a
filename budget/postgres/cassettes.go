package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

func (p *Ledger) PutCassette(ctx context.Context, c budget.Cassette) error {
	return wrapPG(p.retry(ctx, func() error {
		_, err := p.pool.Exec(ctx, `INSERT INTO ledger_cassettes (execution_id, tenant, run_id, data)
			VALUES ($1, $2, $3, $4)
			ON CONFLICT (execution_id) DO UPDATE SET data = EXCLUDED.data, recorded_at = clock_timestamp()`,
			c.ExecutionID, c.Run.Tenant, c.Run.ID, c.Data)
		return err
	}))
}

const cassetteColumns = `execution_id, tenant, run_id, data, recorded_at`

func (p *Ledger) Cassette(ctx context.Context, executionID string) (budget.Cassette, error) {
	c, err := scanPGCassette(p.pool.QueryRow(ctx, `SELECT `+cassetteColumns+` FROM ledger_cassettes WHERE execution_id = $1`, executionID))
	if errors.Is(err, pgx.ErrNoRows) {
		return budget.Cassette{}, fmt.Errorf("%w: no cassette of execution %s", budget.ErrNotFound, executionID)
	}
	return c, wrapPG(err)
}

func (p *Ledger) RunCassettes(ctx context.Context, run budget.RunRef) ([]budget.Cassette, error) {
	rows, err := p.pool.Query(ctx, `SELECT `+cassetteColumns+` FROM ledger_cassettes WHERE tenant = $1 AND run_id = $2
		ORDER BY recorded_at, execution_id`, run.Tenant, run.ID)
	if err != nil {
		return nil, wrapPG(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (budget.Cassette, error) { return scanPGCassette(r) })
	if out == nil && err == nil {
		out = []budget.Cassette{}
	}
	return out, wrapPG(err)
}

func (p *Ledger) SweepCassettes(ctx context.Context, cutoff time.Time) (int, error) {
	tag, err := p.pool.Exec(ctx, `DELETE FROM ledger_cassettes WHERE recorded_at < $1`, cutoff)
	if err != nil {
		return 0, wrapPG(err)
	}
	return int(tag.RowsAffected()), nil
}

func scanPGCassette(r pgx.Row) (budget.Cassette, error) {
	var c budget.Cassette
	err := r.Scan(&c.ExecutionID, &c.Run.Tenant, &c.Run.ID, &c.Data, &c.RecordedAt)
	return c, err
}
