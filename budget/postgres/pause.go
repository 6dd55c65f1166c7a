package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

func (p *Ledger) SavePause(ctx context.Context, ps budget.Pause) error {
	var journal *string
	if ps.Journal != nil {
		j := string(ps.Journal)
		journal = &j
	}
	_, err := p.pool.Exec(ctx, `INSERT INTO ledger_pauses
		(id, tenant, agent, run_key, hold, tool, arguments, view, reason, seq, journal, resumable, asked_at, expires_at, status, owner)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, 'pending', $15)`,
		ps.ID, ps.Tenant, ps.Agent, ps.Run, ps.Hold, ps.Tool, ps.Arguments, ps.View, ps.Reason, ps.Seq, journal, ps.Resumable,
		ps.AskedAt, ps.Expires, p.owner)
	return wrapPG(err)
}

const pauseColumns = `id, tenant, agent, run_key, hold, tool, arguments, view, reason, seq, journal, resumable, asked_at, expires_at,
	status, answered_by, decided_at, claimed, owner, result`

func scanPause(r pgx.Row) (budget.Pause, error) {
	var ps budget.Pause
	var journal, result *string
	var decided *time.Time
	var status string
	err := r.Scan(&ps.ID, &ps.Tenant, &ps.Agent, &ps.Run, &ps.Hold, &ps.Tool, &ps.Arguments, &ps.View, &ps.Reason, &ps.Seq, &journal,
		&ps.Resumable, &ps.AskedAt, &ps.Expires, &status, &ps.AnsweredBy, &decided, &ps.Claimed, &ps.Owner, &result)
	if journal != nil {
		ps.Journal = json.RawMessage(*journal)
	}
	if decided != nil {
		ps.DecidedAt = *decided
	}
	if result != nil {
		ps.Result = json.RawMessage(*result)
	}
	ps.Status = budget.ApprovalStatus(status)
	return ps, err
}

func (p *Ledger) Pause(ctx context.Context, id string) (budget.Pause, error) {
	ps, err := scanPause(p.pool.QueryRow(ctx, `SELECT `+pauseColumns+` FROM ledger_pauses WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return ps, fmt.Errorf("%w: pause %s", budget.ErrNotFound, id)
	}
	return ps, wrapPG(err)
}

func (p *Ledger) PendingPauses(ctx context.Context, tenant, run string) ([]budget.Pause, error) {
	rows, err := p.pool.Query(ctx, `SELECT `+pauseColumns+` FROM ledger_pauses WHERE status = 'pending'
		AND ($1 = '' OR tenant = $1) AND ($2 = '' OR run_key = $2) ORDER BY asked_at, id`, tenant, run)
	if err != nil {
		return nil, wrapPG(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (budget.Pause, error) { return scanPause(r) })
	return out, wrapPG(err)
}

func (p *Ledger) DecidePause(ctx context.Context, id string, status budget.ApprovalStatus, by string) (budget.Pause, error) {
	if !status.AnswersPause() {
		return budget.Pause{}, fmt.Errorf("budget: %q does not answer a pause", status)
	}
	tag, err := p.pool.Exec(ctx, `UPDATE ledger_pauses SET status = $2, answered_by = $3, decided_at = clock_timestamp()
		WHERE id = $1 AND status = 'pending'`, id, string(status), by)
	if err != nil {
		return budget.Pause{}, wrapPG(err)
	}
	ps, err := p.Pause(ctx, id)
	if err == nil && tag.RowsAffected() != 1 {
		err = fmt.Errorf("%w: pause %s is %s", budget.ErrAlreadyFinished, id, ps.Status)
	}
	return ps, err
}

func (p *Ledger) ClaimPause(ctx context.Context, id string) error {
	// Another replica's pause only once its lease has expired or is gone (it closed), as
	// Recover judges an owner gone.
	tag, err := p.pool.Exec(ctx, `UPDATE ledger_pauses ps SET claimed = true
		WHERE ps.id = $1 AND ps.status <> 'pending' AND NOT ps.claimed
			AND (ps.owner = $2 OR NOT EXISTS (SELECT 1 FROM ledger_leases l WHERE l.owner = ps.owner AND l.expires_at >= now()))`,
		id, p.owner)
	if err != nil {
		return wrapPG(err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	ps, err := p.Pause(ctx, id)
	switch {
	case err != nil:
		return err
	case ps.Status != budget.ApprovalPending && !ps.Claimed:
		return fmt.Errorf("%w: pause %s", budget.ErrHeldElsewhere, id)
	}
	return fmt.Errorf("%w: pause %s was claimed already, or is not decided", budget.ErrAlreadyFinished, id)
}

func (p *Ledger) SetPauseResult(ctx context.Context, id string, result json.RawMessage) error {
	_, err := p.pool.Exec(ctx, `UPDATE ledger_pauses SET result = $2 WHERE id = $1`, id, string(result))
	return wrapPG(err)
}

func (p *Ledger) DropPause(ctx context.Context, id string) error {
	_, err := p.pool.Exec(ctx, `DELETE FROM ledger_pauses WHERE id = $1`, id)
	return wrapPG(err)
}

func (p *Ledger) DropPausesBefore(ctx context.Context, t time.Time) (int, error) {
	tag, err := p.pool.Exec(ctx, `DELETE FROM ledger_pauses WHERE asked_at < $1`, t)
	if err != nil {
		return 0, wrapPG(err)
	}
	return int(tag.RowsAffected()), nil
}
