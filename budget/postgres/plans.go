package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

// plansSchema is migration 10: rehearsals' plans (budget.Plans).
const plansSchema = `CREATE TABLE ledger_plans (
		id           text        PRIMARY KEY,
		tenant       text        NOT NULL,
		agent        text        NOT NULL,
		execution_id text        NOT NULL,
		created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
		approved_by  text        NOT NULL DEFAULT '',
		approved_at  timestamptz,
		until        timestamptz
	);
	CREATE TABLE ledger_plan_effects (
		plan_id      text        NOT NULL REFERENCES ledger_plans (id) ON DELETE CASCADE,
		seq          bigint      NOT NULL,
		tool         text        NOT NULL,
		view         text        NOT NULL,
		arguments    text        NOT NULL,
		stand_in     text        NOT NULL,
		covered_call text        NOT NULL DEFAULT '',
		covered_at   timestamptz,
		PRIMARY KEY (plan_id, seq)
	);
	CREATE INDEX ledger_plan_effects_open ON ledger_plan_effects (tool) WHERE covered_call = '';`

func (p *Ledger) SavePlan(ctx context.Context, pl budget.Plan) error {
	return wrapPG(p.retry(ctx, func() error {
		return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO ledger_plans (id, tenant, agent, execution_id) VALUES ($1, $2, $3, $4)`,
				pl.ID, pl.Tenant, pl.Agent, pl.ExecutionID); err != nil {
				return err
			}
			for _, e := range pl.Effects {
				if _, err := tx.Exec(ctx, `INSERT INTO ledger_plan_effects (plan_id, seq, tool, view, arguments, stand_in)
					VALUES ($1, $2, $3, $4, $5, $6)`, pl.ID, e.Seq, e.Tool, e.View, string(e.Arguments), string(e.StandIn)); err != nil {
					return err
				}
			}
			return nil
		})
	}))
}

func (p *Ledger) ApprovePlan(ctx context.Context, tenant, id, by string, until time.Time) error {
	tag, err := p.pool.Exec(ctx, `UPDATE ledger_plans SET approved_by = $1, approved_at = clock_timestamp(), until = $2
		WHERE id = $3 AND tenant = $4`, by, until, id, tenant)
	if err != nil {
		return wrapPG(err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: no plan %s of tenant %s", budget.ErrNotFound, id, tenant)
	}
	return nil
}

func (p *Ledger) CoverCall(ctx context.Context, tenant, agent, tool, view, call string, at time.Time) (string, error) {
	var planID string
	err := p.retry(ctx, func() error {
		return p.pool.QueryRow(ctx, `UPDATE ledger_plan_effects SET covered_call = $6, covered_at = clock_timestamp()
			WHERE (plan_id, seq) = (SELECT e.plan_id, e.seq FROM ledger_plan_effects e JOIN ledger_plans p ON p.id = e.plan_id
				WHERE p.tenant = $1 AND p.agent = $2 AND p.until > $3 AND e.tool = $4 AND e.view = $5 AND e.covered_call = ''
				ORDER BY p.approved_at, e.seq LIMIT 1 FOR UPDATE OF e SKIP LOCKED)
			RETURNING plan_id`, tenant, agent, at, tool, view, call).Scan(&planID)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("%w: no approved plan covers this call of %s", budget.ErrNotFound, tool)
	}
	return planID, wrapPG(err)
}

func (p *Ledger) Plan(ctx context.Context, tenant, id string) (budget.Plan, error) {
	pl := budget.Plan{ID: id, Tenant: tenant}
	var approved, until *time.Time
	err := p.pool.QueryRow(ctx, `SELECT agent, execution_id, created_at, approved_by, approved_at, until FROM ledger_plans
		WHERE id = $1 AND tenant = $2`, id, tenant).Scan(&pl.Agent, &pl.ExecutionID, &pl.CreatedAt, &pl.ApprovedBy, &approved, &until)
	if errors.Is(err, pgx.ErrNoRows) {
		return pl, fmt.Errorf("%w: no plan %s of tenant %s", budget.ErrNotFound, id, tenant)
	}
	if err != nil {
		return pl, wrapPG(err)
	}
	if approved != nil {
		pl.ApprovedAt = *approved
	}
	if until != nil {
		pl.Until = *until
	}
	rows, err := p.pool.Query(ctx, `SELECT seq, tool, view, arguments, stand_in, covered_call, covered_at
		FROM ledger_plan_effects WHERE plan_id = $1 ORDER BY seq`, id)
	if err != nil {
		return pl, wrapPG(err)
	}
	pl.Effects, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (budget.PlanEffect, error) {
		var e budget.PlanEffect
		var args, standIn string
		var covered *time.Time
		err := r.Scan(&e.Seq, &e.Tool, &e.View, &args, &standIn, &e.CoveredCall, &covered)
		e.Arguments, e.StandIn = []byte(args), []byte(standIn)
		if covered != nil {
			e.CoveredAt = *covered
		}
		return e, err
	})
	return pl, wrapPG(err)
}
