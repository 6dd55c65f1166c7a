package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

// programsSchema is the saved programs (budget.Programs), applied after schema: 10.
const programsSchema = `
CREATE TABLE IF NOT EXISTS programs (
	tenant          TEXT    NOT NULL,
	name            TEXT    NOT NULL,
	agent           TEXT    NOT NULL,
	version         TEXT    NOT NULL,
	description     TEXT    NOT NULL,
	input_schema    TEXT    NOT NULL,
	code            TEXT    NOT NULL,
	saved_by        TEXT    NOT NULL,
	saved_at        INTEGER NOT NULL,
	PRIMARY KEY (tenant, name)
);
CREATE TABLE IF NOT EXISTS program_runs (
	execution_id    TEXT    PRIMARY KEY,
	tenant          TEXT    NOT NULL,
	name            TEXT    NOT NULL,
	version         TEXT    NOT NULL,
	at              INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS program_runs_name ON program_runs (tenant, name);
`

func (s *Ledger) PutProgram(ctx context.Context, p budget.SavedProgram) error {
	return s.write(ctx, func(tx *stmtTx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO programs (tenant, name, agent, version, description, input_schema, code, saved_by, saved_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (tenant, name) DO UPDATE SET agent = excluded.agent, version = excluded.version, description = excluded.description,
				input_schema = excluded.input_schema, code = excluded.code, saved_by = excluded.saved_by, saved_at = excluded.saved_at`,
			p.Tenant, p.Name, p.Agent, p.Version, p.Description, string(p.InputSchema), p.Code, p.SavedBy, now())
		return err
	})
}

const programColumns = `tenant, name, agent, version, description, input_schema, code, saved_by, saved_at`

func (s *Ledger) SavedProgram(ctx context.Context, tenant, name string) (budget.SavedProgram, error) {
	p, err := scanProgram(s.db.QueryRowContext(ctx, `SELECT `+programColumns+` FROM programs WHERE tenant = ? AND name = ?`, tenant, name))
	if errors.Is(err, sql.ErrNoRows) {
		return p, fmt.Errorf("%w: no saved program %s of tenant %s", budget.ErrNotFound, name, tenant)
	}
	return p, err
}

func (s *Ledger) SavedPrograms(ctx context.Context, tenant string) ([]budget.SavedProgram, error) {
	out, err := queryAll(ctx, s.db, "saved programs", scanProgram, `SELECT `+programColumns+` FROM programs WHERE tenant = ? ORDER BY name`, tenant)
	if out == nil && err == nil {
		out = []budget.SavedProgram{}
	}
	return out, err
}

func (s *Ledger) DeleteProgram(ctx context.Context, tenant, name string) error {
	return s.write(ctx, func(tx *stmtTx) error {
		r, err := tx.ExecContext(ctx, `DELETE FROM programs WHERE tenant = ? AND name = ?`, tenant, name)
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n == 0 {
			return fmt.Errorf("%w: no saved program %s of tenant %s", budget.ErrNotFound, name, tenant)
		}
		return nil
	})
}

func (s *Ledger) NoteProgramRun(ctx context.Context, tenant string, r budget.ProgramRun) error {
	return s.write(ctx, func(tx *stmtTx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO program_runs (execution_id, tenant, name, version, at) VALUES (?, ?, ?, ?, ?)`,
			r.ExecutionID, tenant, r.Name, r.Version, now())
		return err
	})
}

func (s *Ledger) ProgramRuns(ctx context.Context, tenant, name string) ([]budget.ProgramRun, error) {
	out, err := queryAll(ctx, s.db, "program runs", func(r scanner) (budget.ProgramRun, error) {
		var pr budget.ProgramRun
		var at int64
		err := r.Scan(&pr.ExecutionID, &pr.Name, &pr.Version, &at)
		pr.At = time.Unix(0, at)
		return pr, err
	}, `SELECT execution_id, name, version, at FROM program_runs WHERE tenant = ? AND name = ? ORDER BY at, rowid`, tenant, name)
	if out == nil && err == nil {
		out = []budget.ProgramRun{}
	}
	return out, err
}

func scanProgram(r scanner) (budget.SavedProgram, error) {
	var p budget.SavedProgram
	var schema string
	var at int64
	if err := r.Scan(&p.Tenant, &p.Name, &p.Agent, &p.Version, &p.Description, &schema, &p.Code, &p.SavedBy, &at); err != nil {
		return p, err
	}
	p.InputSchema, p.SavedAt = []byte(schema), time.Unix(0, at)
	return p, nil
}
