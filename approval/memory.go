package approval

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

// memory is budget.Pauses in this process's memory: the store of a Room without a ledger. Its
// owner is always this process, so a decided pause is claimed here once and never elsewhere.
// A pause is dropped once its question has expired and another is saved: a retry naming it is
// then refused as expired by its sealed state, before the store is asked.
type memory struct {
	mu     sync.Mutex
	pauses map[string]budget.Pause
}

func newMemory() *memory { return &memory{pauses: map[string]budget.Pause{}} }

func (m *memory) SavePause(_ context.Context, p budget.Pause) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for id, old := range m.pauses {
		if now.After(old.Expires) {
			delete(m.pauses, id)
		}
	}
	p.Status, p.AnsweredBy, p.DecidedAt, p.Claimed, p.Owner, p.Result = budget.ApprovalPending, "", time.Time{}, false, "", nil
	m.pauses[p.ID] = p
	return nil
}

func (m *memory) Pause(_ context.Context, id string) (budget.Pause, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.pauses[id]
	if !ok {
		return p, fmt.Errorf("%w: pause %s", budget.ErrNotFound, id)
	}
	return p, nil
}

func (m *memory) PendingPauses(_ context.Context, tenant, run string) ([]budget.Pause, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []budget.Pause
	for _, p := range m.pauses {
		if p.Status == budget.ApprovalPending && (tenant == "" || p.Tenant == tenant) && (run == "" || p.Run == run) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b budget.Pause) int {
		if c := a.AskedAt.Compare(b.AskedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out, nil
}

func (m *memory) DecidePause(_ context.Context, id string, status budget.ApprovalStatus, by string) (budget.Pause, error) {
	if !status.AnswersPause() {
		return budget.Pause{}, fmt.Errorf("budget: %q does not answer a pause", status)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.pauses[id]
	switch {
	case !ok:
		return p, fmt.Errorf("%w: pause %s", budget.ErrNotFound, id)
	case p.Status != budget.ApprovalPending:
		return p, fmt.Errorf("%w: pause %s is %s", budget.ErrAlreadyFinished, id, p.Status)
	}
	p.Status, p.AnsweredBy, p.DecidedAt = status, by, time.Now()
	m.pauses[id] = p
	return p, nil
}

func (m *memory) ClaimPause(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.pauses[id]
	switch {
	case !ok:
		return fmt.Errorf("%w: pause %s", budget.ErrNotFound, id)
	case p.Claimed || p.Status == budget.ApprovalPending:
		return fmt.Errorf("%w: pause %s was claimed already, or is not decided", budget.ErrAlreadyFinished, id)
	}
	p.Claimed = true
	m.pauses[id] = p
	return nil
}

func (m *memory) SetPauseResult(_ context.Context, id string, result json.RawMessage) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.pauses[id]; ok {
		p.Result = result
		m.pauses[id] = p
	}
	return nil
}

func (m *memory) DropPause(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.pauses, id)
	return nil
}

func (m *memory) DropPausesBefore(_ context.Context, t time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for id, p := range m.pauses {
		if p.AskedAt.Before(t) {
			delete(m.pauses, id)
			n++
		}
	}
	return n, nil
}
