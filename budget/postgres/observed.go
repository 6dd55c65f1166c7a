package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

const shapeColumns = `tenant, upstream, tool, definition, samples, shape, updated_at`

func (p *Ledger) ObservedShape(ctx context.Context, key budget.ShapeKey) (budget.ObservedShape, error) {
	o, err := scanPGShape(p.pool.QueryRow(ctx, `SELECT `+shapeColumns+` FROM ledger_observed_shapes
		WHERE tenant = $1 AND upstream = $2 AND tool = $3 AND definition = $4`, key.Tenant, key.Upstream, key.Tool, key.Definition))
	if errors.Is(err, pgx.ErrNoRows) {
		return budget.ObservedShape{}, fmt.Errorf("%w: no observed shape of %s's %s", budget.ErrNotFound, key.Upstream, key.Tool)
	}
	return o, wrapPG(err)
}

// MergeObservedShape is read-merge-write in one transaction: the key's row is made (empty,
// samples 0) when missing and locked FOR UPDATE before it is read, so replicas merging the
// same key at once take turns, each reading what the one before committed.
func (p *Ledger) MergeObservedShape(ctx context.Context, key budget.ShapeKey, merge func(old budget.ObservedShape) (budget.ObservedShape, error)) (budget.ObservedShape, error) {
	var kept budget.ObservedShape
	err := p.retry(ctx, func() error {
		return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, `INSERT INTO ledger_observed_shapes (tenant, upstream, tool, definition)
				VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`, key.Tenant, key.Upstream, key.Tool, key.Definition)
			if err != nil {
				return err
			}
			added := tag.RowsAffected() == 1
			old, err := scanPGShape(tx.QueryRow(ctx, `SELECT `+shapeColumns+` FROM ledger_observed_shapes
				WHERE tenant = $1 AND upstream = $2 AND tool = $3 AND definition = $4 FOR UPDATE`, key.Tenant, key.Upstream, key.Tool, key.Definition))
			if err != nil {
				return err
			}
			if added {
				old = budget.ObservedShape{Key: key}
			}
			n, err := merge(old)
			if err != nil {
				return err
			}
			if n.Shape == nil {
				n.Shape = []byte{}
			}
			n.Key = key
			if err := tx.QueryRow(ctx, `UPDATE ledger_observed_shapes SET samples = $5, shape = $6, updated_at = clock_timestamp()
				WHERE tenant = $1 AND upstream = $2 AND tool = $3 AND definition = $4 RETURNING updated_at`,
				key.Tenant, key.Upstream, key.Tool, key.Definition, n.Samples, n.Shape).Scan(&n.UpdatedAt); err != nil {
				return err
			}
			if added {
				if _, err := tx.Exec(ctx, `DELETE FROM ledger_observed_shapes WHERE tenant = $1 AND (upstream, tool, definition) IN (
					SELECT upstream, tool, definition FROM ledger_observed_shapes WHERE tenant = $1
					ORDER BY updated_at DESC, upstream, tool, definition OFFSET $2)`, key.Tenant, budget.MaxObservedShapes); err != nil {
					return err
				}
			}
			kept = n
			return nil
		})
	})
	return kept, wrapPG(err)
}

func scanPGShape(r pgx.Row) (budget.ObservedShape, error) {
	var o budget.ObservedShape
	var samples int64
	err := r.Scan(&o.Key.Tenant, &o.Key.Upstream, &o.Key.Tool, &o.Key.Definition, &samples, &o.Shape, &o.UpdatedAt)
	o.Samples = int(samples)
	return o, err
}
