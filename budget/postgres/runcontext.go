package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
)

// runContextMigration keeps each Run's context economy on its row (the ledger's migration
// 14), as the SQLite ledger's version 12 does: RunContext, read at the end of every
// execution, summed it over every ended execution of the Run, linear in a long session
// (docs/design.md §19.5). A trigger adds an execution's figures as it ends (and takes back
// the figures of an end written over), so a binary of an older version sharing the database,
// which ends an execution with its own UPDATE and reads the sums its own way, keeps the Run's
// row exact too. The trigger is made and the sums computed afresh in the migration's one
// transaction; CREATE TRIGGER waits for ends in flight and holds new ones until it commits,
// so no end is counted twice or missed.
const runContextMigration = `ALTER TABLE ledger_runs
		ADD COLUMN binding_bytes  bigint NOT NULL DEFAULT 0,
		ADD COLUMN returned_bytes bigint NOT NULL DEFAULT 0,
		ADD COLUMN kept_out_bytes bigint NOT NULL DEFAULT 0;
	CREATE FUNCTION ledger_runs_context() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		UPDATE ledger_runs SET
			binding_bytes = binding_bytes + (CASE WHEN NEW.ended_at IS NULL THEN 0 ELSE NEW.binding_bytes END)
				- (CASE WHEN OLD.ended_at IS NULL THEN 0 ELSE OLD.binding_bytes END),
			returned_bytes = returned_bytes + (CASE WHEN NEW.ended_at IS NULL THEN 0 ELSE NEW.returned_bytes END)
				- (CASE WHEN OLD.ended_at IS NULL THEN 0 ELSE OLD.returned_bytes END),
			kept_out_bytes = kept_out_bytes + (CASE WHEN NEW.ended_at IS NULL THEN 0 ELSE NEW.kept_out_bytes END)
				- (CASE WHEN OLD.ended_at IS NULL THEN 0 ELSE OLD.kept_out_bytes END)
		WHERE tenant = NEW.tenant AND run_id = NEW.run_id;
		RETURN NULL;
	END $$;
	CREATE TRIGGER ledger_runs_context AFTER UPDATE OF ended_at, binding_bytes, returned_bytes, kept_out_bytes
		ON ledger_executions FOR EACH ROW WHEN (OLD.ended_at IS NOT NULL OR NEW.ended_at IS NOT NULL)
		EXECUTE FUNCTION ledger_runs_context();
	UPDATE ledger_runs r SET (binding_bytes, returned_bytes, kept_out_bytes) = (
		SELECT coalesce(sum(e.binding_bytes), 0), coalesce(sum(e.returned_bytes), 0), coalesce(sum(e.kept_out_bytes), 0)
		FROM ledger_executions e WHERE e.tenant = r.tenant AND e.run_id = r.run_id AND e.ended_at IS NOT NULL);`

func (p *Ledger) RunContext(ctx context.Context, run budget.RunRef) (telemetry.Context, error) {
	var c telemetry.Context
	err := p.pool.QueryRow(ctx, `SELECT binding_bytes, returned_bytes, kept_out_bytes FROM ledger_runs
		WHERE tenant = $1 AND run_id = $2`, run.Tenant, run.ID).Scan(&c.BindingBytes, &c.ReturnedBytes, &c.KeptOutBytes)
	if errors.Is(err, pgx.ErrNoRows) {
		return telemetry.Context{}, nil // a Run never seen
	}
	if err != nil {
		return telemetry.Context{}, wrapPG(err)
	}
	return c, nil
}
