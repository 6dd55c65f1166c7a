package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/internal/owner"
)

func (s *Ledger) SavePause(ctx context.Context, p budget.Pause) error {
	var journal any
	if p.Journal != nil {
		journal = string(p.Journal)
	}
	return s.write(ctx, func(tx *stmtTx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO pauses
			(id, tenant, agent, run_key, hold, tool, arguments, view, reason, seq, journal, resumable, asked_at, expires_at, status, owner)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?)`,
			p.ID, p.Tenant, p.Agent, p.Run, p.Hold, p.Tool, p.Arguments, p.View, p.Reason, p.Seq, journal, p.Resumable,
			p.AskedAt.UnixNano(), p.Expires.UnixNano(), s.lock.ID())
		return err
	})
}

const pauseColumns = `id, tenant, agent, run_key, hold, tool, arguments, view, reason, seq, journal, resumable, asked_at, expires_at,
	status, answered_by, decided_at, claimed, owner, result`

func scanPause(r scanner) (budget.Pause, error) {
	var p budget.Pause
	var journal, result sql.NullString
	var asked, expires int64
	var decided sql.NullInt64
	var status string
	if err := r.Scan(&p.ID, &p.Tenant, &p.Agent, &p.Run, &p.Hold, &p.Tool, &p.Arguments, &p.View, &p.Reason, &p.Seq, &journal,
		&p.Resumable, &asked, &expires, &status, &p.AnsweredBy, &decided, &p.Claimed, &p.Owner, &result); err != nil {
		return p, err
	}
	p.Journal, p.Result = nullBytes(journal), nullBytes(result)
	p.AskedAt, p.Expires, p.DecidedAt = time.Unix(0, asked), time.Unix(0, expires), nullTime(decided)
	p.Status = budget.ApprovalStatus(status)
	return p, nil
}

func (s *Ledger) Pause(ctx context.Context, id string) (budget.Pause, error) {
	p, err := scanPause(s.db.QueryRowContext(ctx, `SELECT `+pauseColumns+` FROM pauses WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return p, fmt.Errorf("%w: pause %s", budget.ErrNotFound, id)
	}
	return p, err
}

func (s *Ledger) PendingPauses(ctx context.Context, tenant, run string) ([]budget.Pause, error) {
	return queryAll(ctx, s.db, "pauses", scanPause, `SELECT `+pauseColumns+` FROM pauses WHERE status = 'pending'
		AND (? = '' OR tenant = ?) AND (? = '' OR run_key = ?) ORDER BY asked_at, id`, tenant, tenant, run, run)
}

func (s *Ledger) DecidePause(ctx context.Context, id string, status budget.ApprovalStatus, by string) (budget.Pause, error) {
	if !status.AnswersPause() {
		return budget.Pause{}, fmt.Errorf("budget: %q does not answer a pause", status)
	}
	n, err := s.affect(ctx, `UPDATE pauses SET status = ?, answered_by = ?, decided_at = ?
		WHERE id = ? AND status = 'pending'`, string(status), by, now(), id)
	if err != nil {
		return budget.Pause{}, err
	}
	p, err := s.Pause(ctx, id)
	if err == nil && n != 1 {
		err = fmt.Errorf("%w: pause %s is %s", budget.ErrAlreadyFinished, id, p.Status)
	}
	return p, err
}

func (s *Ledger) ClaimPause(ctx context.Context, id string) error {
	p, err := s.Pause(ctx, id)
	if err != nil {
		return err
	}
	if p.Claimed || p.Status == budget.ApprovalPending {
		return fmt.Errorf("%w: pause %s was claimed already, or is not decided", budget.ErrAlreadyFinished, id)
	}
	if p.Owner != s.lock.ID() {
		// Another opener's pause: only once its lock can be taken (it closed or died), and
		// held while the claim is written, so the owner cannot come back meanwhile.
		gone, unlock, err := owner.Claim(s.locks, p.Owner)
		if err != nil {
			return err
		}
		defer unlock()
		if !gone {
			return fmt.Errorf("%w: pause %s", budget.ErrHeldElsewhere, id)
		}
	}
	return s.write(ctx, func(tx *stmtTx) error {
		r, err := tx.ExecContext(ctx, `UPDATE pauses SET claimed = 1 WHERE id = ? AND status != 'pending' AND claimed = 0`, id)
		if err != nil {
			return err
		}
		if n, err := r.RowsAffected(); err != nil || n == 1 {
			return err
		}
		return fmt.Errorf("%w: pause %s was claimed already, or is not decided", budget.ErrAlreadyFinished, id)
	})
}

func (s *Ledger) SetPauseResult(ctx context.Context, id string, result json.RawMessage) error {
	return s.write(ctx, func(tx *stmtTx) error {
		_, err := tx.ExecContext(ctx, `UPDATE pauses SET result = ? WHERE id = ?`, string(result), id)
		return err
	})
}

func (s *Ledger) DropPause(ctx context.Context, id string) error {
	return s.write(ctx, func(tx *stmtTx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM pauses WHERE id = ?`, id)
		return err
	})
}

func (s *Ledger) DropPausesBefore(ctx context.Context, t time.Time) (int, error) {
	return s.affect(ctx, `DELETE FROM pauses WHERE asked_at < ?`, t.UnixNano())
}
