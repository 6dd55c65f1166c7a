package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

func (s *Ledger) Execution(ctx context.Context, id string) (budget.ExecutionRecord, error) {
	if err := s.Flush(ctx); err != nil { // a call finished lazily counts in the execution's usage
		return budget.ExecutionRecord{}, err
	}
	var x budget.ExecutionRecord
	var started int64
	var ended sql.NullInt64
	var att, network sql.NullString
	err := s.db.QueryRowContext(ctx, `SELECT id, tenant, run_id, agent_version, status, started_at, ended_at,
		calls, transfer_bytes, produced_bytes, preserved_bytes, attachments, binding_bytes, returned_bytes, kept_out_bytes,
		network FROM executions WHERE id = ?`, id).Scan(&x.ID, &x.Run.Tenant, &x.Run.ID, &x.AgentVersion, &x.Status,
		&started, &ended, &x.Usage.Calls, &x.Usage.TransferBytes, &x.Usage.ProducedBytes, &x.Usage.PreservedBytes, &att,
		&x.Context.BindingBytes, &x.Context.ReturnedBytes, &x.Context.KeptOutBytes, &network)
	if errors.Is(err, sql.ErrNoRows) {
		return budget.ExecutionRecord{}, fmt.Errorf("%w: execution %s", budget.ErrNotFound, id)
	}
	if err != nil {
		return budget.ExecutionRecord{}, fmt.Errorf("budget: execution: %w", err)
	}
	x.StartedAt, x.EndedAt, x.Attachments, x.Network = time.Unix(0, started), nullTime(ended), nullBytes(att), nullBytes(network)
	if !ended.Valid {
		// Running, or its host stopped: the row holds only the bytes charged outside calls
		// (EndExecution writes the whole usage), so its calls' are summed here.
		var u budget.Usage
		err := s.db.QueryRowContext(ctx, `SELECT coalesce(sum(spent), 0), coalesce(sum(transfer_bytes), 0),
			coalesce(sum(produced_bytes), 0), coalesce(sum(preserved_bytes), 0) FROM tool_calls
			WHERE tenant = ? AND run_id = ? AND execution_id = ?`, x.Run.Tenant, x.Run.ID, id).
			Scan(&u.Calls, &u.TransferBytes, &u.ProducedBytes, &u.PreservedBytes)
		if err != nil {
			return budget.ExecutionRecord{}, fmt.Errorf("budget: execution %s: its calls: %w", id, err)
		}
		x.Usage = x.Usage.Add(u)
	}
	return x, nil
}
