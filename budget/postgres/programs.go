package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

// programsSchema is migration 11: saved programs (budget.Programs).
const programsSchema = `CREATE TABLE ledger_programs (
		tenant       text        NOT NULL,
		name         text        NOT NULL,
		agent        text        NOT NULL,
		version      text        NOT NULL,
		description  text        NOT NULL,
		input_schema text        NOT NULL,
		code         text        NOT NULL,
		saved_by     text        NOT NULL,
		saved_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
		PRIMARY KEY (tenant, name)
	);
	CREATE TABLE ledger_program_runs (
		execution_id text        PRIMARY KEY,
		tenant       text        NOT NULL,
		name         text        NOT NULL,
		version      text        NOT NULL,
		at           timestamptz NOT NULL DEFAULT clock_timestamp()
	);
	CREATE INDEX ledger_program_runs_name ON ledger_program_runs (tenant, name);`

func (p *Ledger) PutProgram(ctx context.Context, sp budget.SavedProgram) error {
	_, err := p.pool.Exec(ctx, `INSERT INTO ledger_programs (tenant, name, agent, version, description, input_schema, code, saved_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (tenant, name) DO UPDATE SET agent = EXCLUDED.agent, version = EXCLUDED.version, description = EXCLUDED.description,
			input_schema = EXCLUDED.input_schema, code = EXCLUDED.code, saved_by = EXCLUDED.saved_by, saved_at = clock_timestamp()`,
		sp.Tenant, sp.Name, sp.Agent, sp.Version, sp.Description, string(sp.InputSchema), sp.Code, sp.SavedBy)
	return wrapPG(err)
}

const programColumns = `tenant, name, agent, version, description, input_schema, code, saved_by, saved_at`

func (p *Ledger) SavedProgram(ctx context.Context, tenant, name string) (budget.SavedProgram, error) {
	sp, err := scanPGProgram(p.pool.QueryRow(ctx, `SELECT `+programColumns+` FROM ledger_programs WHERE tenant = $1 AND name = $2`, tenant, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return sp, fmt.Errorf("%w: no saved program %s of tenant %s", budget.ErrNotFound, name, tenant)
	}
	return sp, wrapPG(err)
}

func (p *Ledger) SavedPrograms(ctx context.Context, tenant string) ([]budget.SavedProgram, error) {
	rows, err := p.pool.Query(ctx, `SELECT `+programColumns+` FROM ledger_programs WHERE tenant = $1 ORDER BY name`, tenant)
	if err != nil {
		return nil, wrapPG(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (budget.SavedProgram, error) { return scanPGProgram(r) })
	if out == nil && err == nil {
		out = []budget.SavedProgram{}
	}
	return out, wrapPG(err)
}

func (p *Ledger) DeleteProgram(ctx context.Context, tenant, name string) error {
	tag, err := p.pool.Exec(ctx, `DELETE FROM ledger_programs WHERE tenant = $1 AND name = $2`, tenant, name)
	if err != nil {
		return wrapPG(err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: no saved program %s of tenant %s", budget.ErrNotFound, name, tenant)
	}
	return nil
}

func (p *Ledger) NoteProgramRun(ctx context.Context, tenant string, r budget.ProgramRun) error {
	_, err := p.pool.Exec(ctx, `INSERT INTO ledger_program_runs (execution_id, tenant, name, version) VALUES ($1, $2, $3, $4)`,
		r.ExecutionID, tenant, r.Name, r.Version)
	return wrapPG(err)
}

func (p *Ledger) ProgramRuns(ctx context.Context, tenant, name string) ([]budget.ProgramRun, error) {
	rows, err := p.pool.Query(ctx, `SELECT execution_id, name, version, at FROM ledger_program_runs WHERE tenant = $1 AND name = $2
		ORDER BY at, execution_id`, tenant, name)
	if err != nil {
		return nil, wrapPG(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (budget.ProgramRun, error) {
		var pr budget.ProgramRun
		err := r.Scan(&pr.ExecutionID, &pr.Name, &pr.Version, &pr.At)
		return pr, err
	})
	if out == nil && err == nil {
		out = []budget.ProgramRun{}
	}
	return out, wrapPG(err)
}

func scanPGProgram(r pgx.Row) (budget.SavedProgram, error) {
	var sp budget.SavedProgram
	var schema string
	err := r.Scan(&sp.Tenant, &sp.Name, &sp.Agent, &sp.Version, &sp.Description, &schema, &sp.Code, &sp.SavedBy, &sp.SavedAt)
	sp.InputSchema = []byte(schema)
	return sp, err
}
