package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

// plansSchema is the rehearsals' plans (budget.Plans), applied after schema: 10.
const plansSchema = `
CREATE TABLE IF NOT EXISTS plans (
	id              TEXT    PRIMARY KEY,
	tenant          TEXT    NOT NULL,
	agent           TEXT    NOT NULL,
	execution_id    TEXT    NOT NULL,
	created_at      INTEGER NOT NULL,
	approved_by     TEXT    NOT NULL DEFAULT '',
	approved_at     INTEGER,
	until           INTEGER
);
CREATE TABLE IF NOT EXISTS plan_effects (
	plan_id         TEXT    NOT NULL REFERENCES plans (id) ON DELETE CASCADE,
	seq             INTEGER NOT NULL,
	tool            TEXT    NOT NULL,
	view            TEXT    NOT NULL,
	arguments       TEXT    NOT NULL,
	stand_in        TEXT    NOT NULL,
	covered_call    TEXT    NOT NULL DEFAULT '',
	covered_at      INTEGER,
	PRIMARY KEY (plan_id, seq)
);
CREATE INDEX IF NOT EXISTS plan_effects_open ON plan_effects (tool) WHERE covered_call = '';
`

func (s *Ledger) SavePlan(ctx context.Context, p budget.Plan) error {
	return s.write(ctx, func(tx *stmtTx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO plans (id, tenant, agent, execution_id, created_at) VALUES (?, ?, ?, ?, ?)`,
			p.ID, p.Tenant, p.Agent, p.ExecutionID, now()); err != nil {
			return err
		}
		for _, e := range p.Effects {
			if _, err := tx.ExecContext(ctx, `INSERT INTO plan_effects (plan_id, seq, tool, view, arguments, stand_in) VALUES (?, ?, ?, ?, ?, ?)`,
				p.ID, e.Seq, e.Tool, e.View, string(e.Arguments), string(e.StandIn)); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *Ledger) ApprovePlan(ctx context.Context, tenant, id, by string, until time.Time) error {
	return s.write(ctx, func(tx *stmtTx) error {
		r, err := tx.ExecContext(ctx, `UPDATE plans SET approved_by = ?, approved_at = ?, until = ? WHERE id = ? AND tenant = ?`,
			by, now(), until.UnixNano(), id, tenant)
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n == 0 {
			return fmt.Errorf("%w: no plan %s of tenant %s", budget.ErrNotFound, id, tenant)
		}
		return nil
	})
}

func (s *Ledger) CoverCall(ctx context.Context, tenant, agent, tool, view, call string, at time.Time) (string, error) {
	var planID string
	err := s.write(ctx, func(tx *stmtTx) error {
		var seq int
		err := tx.QueryRowContext(ctx, `SELECT e.plan_id, e.seq FROM plan_effects e JOIN plans p ON p.id = e.plan_id
			WHERE p.tenant = ? AND p.agent = ? AND p.until > ? AND e.tool = ? AND e.view = ? AND e.covered_call = ''
			ORDER BY p.approved_at, e.seq LIMIT 1`, tenant, agent, at.UnixNano(), tool, view).Scan(&planID, &seq)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: no approved plan covers this call of %s", budget.ErrNotFound, tool)
		}
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE plan_effects SET covered_call = ?, covered_at = ? WHERE plan_id = ? AND seq = ?`,
			call, now(), planID, seq)
		return err
	})
	if err != nil {
		return "", err
	}
	return planID, nil
}

func (s *Ledger) Plan(ctx context.Context, tenant, id string) (budget.Plan, error) {
	p := budget.Plan{ID: id, Tenant: tenant}
	var created int64
	var approved, until sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT agent, execution_id, created_at, approved_by, approved_at, until FROM plans
		WHERE id = ? AND tenant = ?`, id, tenant).Scan(&p.Agent, &p.ExecutionID, &created, &p.ApprovedBy, &approved, &until)
	if errors.Is(err, sql.ErrNoRows) {
		return p, fmt.Errorf("%w: no plan %s of tenant %s", budget.ErrNotFound, id, tenant)
	}
	if err != nil {
		return p, fmt.Errorf("budget: plan: %w", err)
	}
	p.CreatedAt = time.Unix(0, created)
	if approved.Valid {
		p.ApprovedAt = time.Unix(0, approved.Int64)
	}
	if until.Valid {
		p.Until = time.Unix(0, until.Int64)
	}
	p.Effects, err = queryAll(ctx, s.db, "plan effects", scanEffect, `SELECT seq, tool, view, arguments, stand_in, covered_call, covered_at
		FROM plan_effects WHERE plan_id = ? ORDER BY seq`, id)
	return p, err
}

func scanEffect(r scanner) (budget.PlanEffect, error) {
	var e budget.PlanEffect
	var args, standIn string
	var covered sql.NullInt64
	if err := r.Scan(&e.Seq, &e.Tool, &e.View, &args, &standIn, &e.CoveredCall, &covered); err != nil {
		return e, err
	}
	e.Arguments, e.StandIn = []byte(args), []byte(standIn)
	if covered.Valid {
		e.CoveredAt = time.Unix(0, covered.Int64)
	}
	return e, nil
}
