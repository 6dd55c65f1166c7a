package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

func (p *Ledger) Execution(ctx context.Context, id string) (budget.ExecutionRecord, error) {
	_ = p.Flush(ctx) // a call finished lazily counts in the execution's usage
	var x budget.ExecutionRecord
	var ended *time.Time
	var att, network *string
	err := p.pool.QueryRow(ctx, `SELECT id, tenant, run_id, agent_version, status, started_at, ended_at,
		calls, transfer_bytes, produced_bytes, preserved_bytes, attachments, binding_bytes, returned_bytes, kept_out_bytes,
		network FROM ledger_executions WHERE id = $1`, id).Scan(&x.ID, &x.Run.Tenant, &x.Run.ID, &x.AgentVersion, &x.Status,
		&x.StartedAt, &ended, &x.Usage.Calls, &x.Usage.TransferBytes, &x.Usage.ProducedBytes, &x.Usage.PreservedBytes, &att,
		&x.Context.BindingBytes, &x.Context.ReturnedBytes, &x.Context.KeptOutBytes, &network)
	if errors.Is(err, pgx.ErrNoRows) {
		return budget.ExecutionRecord{}, fmt.Errorf("%w: execution %s", budget.ErrNotFound, id)
	}
	if err != nil {
		return budget.ExecutionRecord{}, wrapPG(err)
	}
	if ended != nil {
		x.EndedAt = *ended
	}
	if att != nil {
		x.Attachments = []byte(*att)
	}
	if network != nil {
		x.Network = []byte(*network)
	}
	return x, nil
}
