package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

const shapeColumns = `tenant, upstream, tool, definition, samples, shape, updated_at`

func (s *Ledger) ObservedShape(ctx context.Context, key budget.ShapeKey) (budget.ObservedShape, error) {
	o, err := scanShape(prepared{s}.QueryRowContext(ctx, `SELECT `+shapeColumns+` FROM observed_shapes
		WHERE tenant = ? AND upstream = ? AND tool = ? AND definition = ?`, key.Tenant, key.Upstream, key.Tool, key.Definition))
	if errors.Is(err, sql.ErrNoRows) {
		return budget.ObservedShape{}, fmt.Errorf("%w: no observed shape of %s's %s", budget.ErrNotFound, key.Upstream, key.Tool)
	}
	return o, err
}

// MergeObservedShape reads, merges and writes in one write transaction: SQLite's write
// transactions are one at a time (BEGIN IMMEDIATE), across processes too.
func (s *Ledger) MergeObservedShape(ctx context.Context, key budget.ShapeKey, merge func(old budget.ObservedShape) (budget.ObservedShape, error)) (budget.ObservedShape, error) {
	var kept budget.ObservedShape
	err := s.write(ctx, func(tx *stmtTx) error {
		old, err := scanShape(tx.QueryRowContext(ctx, `SELECT `+shapeColumns+` FROM observed_shapes
			WHERE tenant = ? AND upstream = ? AND tool = ? AND definition = ?`, key.Tenant, key.Upstream, key.Tool, key.Definition))
		found := err == nil
		if errors.Is(err, sql.ErrNoRows) {
			old = budget.ObservedShape{Key: key}
		} else if err != nil {
			return err
		}
		n, err := merge(old)
		if err != nil {
			return err
		}
		n.Key, n.UpdatedAt = key, time.Unix(0, now())
		if n.Shape == nil {
			n.Shape = []byte{}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO observed_shapes (`+shapeColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (tenant, upstream, tool, definition) DO UPDATE SET samples = excluded.samples, shape = excluded.shape,
			updated_at = excluded.updated_at`,
			key.Tenant, key.Upstream, key.Tool, key.Definition, n.Samples, n.Shape, n.UpdatedAt.UnixNano()); err != nil {
			return err
		}
		if !found {
			if _, err := tx.ExecContext(ctx, `DELETE FROM observed_shapes WHERE rowid IN (SELECT rowid FROM observed_shapes
				WHERE tenant = ? ORDER BY updated_at DESC, rowid DESC LIMIT -1 OFFSET ?)`, key.Tenant, budget.MaxObservedShapes); err != nil {
				return err
			}
		}
		kept = n
		return nil
	})
	return kept, err
}

func scanShape(r scanner) (budget.ObservedShape, error) {
	var o budget.ObservedShape
	var at int64
	if err := r.Scan(&o.Key.Tenant, &o.Key.Upstream, &o.Key.Tool, &o.Key.Definition, &o.Samples, &o.Shape, &at); err != nil {
		return o, err
	}
	o.UpdatedAt = time.Unix(0, at)
	return o, nil
}
