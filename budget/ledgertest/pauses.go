package ledgertest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

// contractPauses: a saved pause reads back whole and is listed while pending; of answers
// given at once from many goroutines (two channels, a person and an operator) exactly one
// stands and the others see it; a decided pause is claimed once; a second ledger on the same
// place (another process, another replica) sees all of it; dropped pauses are gone.
func contractPauses(t *testing.T, p budget.Ledger, reopen func(t *testing.T, l budget.Ledger) budget.Ledger) {
	ctx := context.Background()
	asked := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	want := budget.Pause{ID: "q_1", Tenant: "t", Agent: "a", Run: "named:r", Hold: "h_1", Tool: "crm__wipe",
		Arguments: `{"api_key":"[redacted]","id":7}`, View: "  api_key = [redacted]\n  id = 7\nNot shown: api_key\n",
		Reason: "approval_required", Seq: 3,
		Journal: json.RawMessage(`[{"seq":1}]`), Resumable: true, AskedAt: asked, Expires: asked.Add(2 * time.Minute)}
	if err := p.SavePause(ctx, want); err != nil {
		t.Fatal(err)
	}
	if err := p.SavePause(ctx, budget.Pause{ID: "q_old", Tenant: "u", Agent: "a", Hold: "h_2", Tool: "x", AskedAt: asked.Add(-time.Hour),
		Expires: asked}); err != nil {
		t.Fatal(err)
	}
	got, err := p.Pause(ctx, "q_1")
	if err != nil {
		t.Fatal(err)
	}
	want.Status = budget.ApprovalPending
	if !got.AskedAt.Equal(want.AskedAt) || !got.Expires.Equal(want.Expires) || string(got.Journal) != string(want.Journal) {
		t.Errorf("read back %+v, want %+v", got, want)
	}
	got.AskedAt, got.Expires, got.Journal, want.Journal = want.AskedAt, want.Expires, nil, nil
	if got.ID != want.ID || got.Tenant != want.Tenant || got.Agent != want.Agent || got.Run != want.Run || got.Hold != want.Hold ||
		got.Tool != want.Tool || got.Arguments != want.Arguments || got.View != want.View || got.Reason != want.Reason || got.Seq != want.Seq ||
		got.Resumable != want.Resumable || got.Status != want.Status || got.Claimed {
		t.Errorf("read back %+v, want %+v", got, want)
	}
	if _, err := p.Pause(ctx, "q_none"); !errors.Is(err, budget.ErrNotFound) {
		t.Errorf("an unknown pause: %v, want ErrNotFound", err)
	}
	if err := p.ClaimPause(ctx, "q_1"); !errors.Is(err, budget.ErrAlreadyFinished) {
		t.Errorf("claiming a pending pause: %v, want ErrAlreadyFinished", err)
	}
	other := reopen(t, p)
	pending, err := other.PendingPauses(ctx, "", "")
	if err != nil || len(pending) != 2 || pending[0].ID != "q_old" || pending[1].ID != "q_1" {
		t.Fatalf("pending from another ledger: %+v, %v", pending, err)
	}

	answeredOnce(t, p, other)
	claimedOnceItsOwnerGone(t, other, reopen(t, p), asked)
	if d, err := other.Pause(ctx, "q_1"); err != nil || !d.Claimed || d.AnsweredBy != "someone" || d.DecidedAt.IsZero() || d.Result != nil {
		t.Errorf("decided and claimed: %+v, %v", d, err)
	}
	if err := p.SetPauseResult(ctx, "q_1", json.RawMessage(`{"content":[]}`)); err != nil {
		t.Fatal(err)
	}
	if d, err := other.Pause(ctx, "q_1"); err != nil || string(d.Result) != `{"content":[]}` {
		t.Errorf("the result relayed: %s, %v", d.Result, err)
	}
	if pending, _ := p.PendingPauses(ctx, "", ""); len(pending) != 1 || pending[0].ID != "q_old" {
		t.Errorf("pending after the answer: %+v", pending)
	}
	if n, err := other.DropPausesBefore(ctx, asked.Add(-time.Minute)); err != nil || n != 1 {
		t.Errorf("dropped %d before the retention, %v; want the old one", n, err)
	}
	if err := p.DropPause(ctx, "q_1"); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Pause(ctx, "q_1"); !errors.Is(err, budget.ErrNotFound) {
		t.Errorf("a dropped pause: %v", err)
	}
}

// contractPendingFiltered: the store filters pending pauses by tenant and by run (Pause.Run),
// "" meaning any, and leaves out the answered ones; oldest first still.
func contractPendingFiltered(t *testing.T, p budget.Pauses) {
	ctx := context.Background()
	asked := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	for i, q := range []struct{ id, tenant, run string }{
		{"q_t1", "t", "named:r1"}, {"q_t2", "t", "named:r2"}, {"q_u1", "u", "named:r1"}, {"q_u2", "u", "named:r2"}, {"q_done", "t", "named:r1"},
	} {
		at := asked.Add(time.Duration(i) * time.Second)
		if err := p.SavePause(ctx, budget.Pause{ID: q.id, Tenant: q.tenant, Agent: "a", Run: q.run, Hold: "h_" + q.id, Tool: "x",
			AskedAt: at, Expires: at.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.DecidePause(ctx, "q_done", budget.ApprovalAccepted, "someone"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tenant, run string
		want        []string
	}{
		{"", "", []string{"q_t1", "q_t2", "q_u1", "q_u2"}},
		{"t", "", []string{"q_t1", "q_t2"}},
		{"u", "", []string{"q_u1", "q_u2"}},
		{"t", "named:r2", []string{"q_t2"}},
		{"u", "named:r1", []string{"q_u1"}},
		{"", "named:r1", []string{"q_t1", "q_u1"}},
		{"v", "", nil},
		{"t", "named:r3", nil},
	} {
		pending, err := p.PendingPauses(ctx, c.tenant, c.run)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ps := range pending {
			got = append(got, ps.ID)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("pending of tenant %q, run %q: %v, want %v", c.tenant, c.run, got, c.want)
		}
	}
}

// answeredOnce: of answers to pause q_1 given at once through p and other, one stands, and the
// decided pause is claimed once, by its owner (p) while it lives.
func answeredOnce(t *testing.T, p, other budget.Ledger) {
	ctx := context.Background()
	// Answers from both ledgers at once: one stands.
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for i := range 8 {
		wg.Go(func() {
			l, status := p, budget.ApprovalAccepted
			if i%2 == 1 {
				l, status = other, budget.ApprovalDeclined
			}
			d, err := l.DecidePause(ctx, "q_1", status, "someone")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case !errors.Is(err, budget.ErrAlreadyFinished):
				t.Errorf("a losing answer: %v, want ErrAlreadyFinished", err)
			}
			if d.Status != budget.ApprovalAccepted && d.Status != budget.ApprovalDeclined {
				t.Errorf("the answer seen: %q", d.Status)
			}
		})
	}
	wg.Wait()
	if won != 1 {
		t.Errorf("%d answers stood, want 1", won)
	}
	if _, err := p.DecidePause(ctx, "q_1", budget.ApprovalTimedOut, ""); err == nil {
		t.Errorf("a pause was answered timed_out")
	}
	if err := other.ClaimPause(ctx, "q_1"); !errors.Is(err, budget.ErrHeldElsewhere) {
		t.Errorf("claimed by another ledger while its owner is open: %v, want ErrHeldElsewhere", err)
	}
	if err := p.ClaimPause(ctx, "q_1"); err != nil {
		t.Errorf("claimed by its owner: %v", err)
	}
	if err := p.ClaimPause(ctx, "q_1"); !errors.Is(err, budget.ErrAlreadyFinished) {
		t.Errorf("claimed twice: %v, want ErrAlreadyFinished", err)
	}
	if err := other.ClaimPause(ctx, "q_1"); !errors.Is(err, budget.ErrAlreadyFinished) {
		t.Errorf("claimed by another ledger once claimed, its owner alive: %v, want ErrAlreadyFinished", err)
	}
}

// claimedOnceItsOwnerGone: a pause saved through gone (another opener) is held while gone
// lives, and any may claim it once gone is closed.
func claimedOnceItsOwnerGone(t *testing.T, other, gone budget.Ledger, asked time.Time) {
	ctx := context.Background()
	// An owner gone (closed here; a process killed drops its lock or lease too): any may claim.
	if err := gone.SavePause(ctx, budget.Pause{ID: "q_2", Tenant: "t", Agent: "a", Hold: "h_3", Tool: "x", AskedAt: asked, Expires: asked}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.DecidePause(ctx, "q_2", budget.ApprovalAccepted, ""); err != nil {
		t.Fatal(err)
	}
	if err := other.ClaimPause(ctx, "q_2"); !errors.Is(err, budget.ErrHeldElsewhere) {
		t.Errorf("claimed while its owner is open: %v, want ErrHeldElsewhere", err)
	}
	if err := gone.Close(); err != nil {
		t.Fatal(err)
	}
	if err := other.ClaimPause(ctx, "q_2"); err != nil {
		t.Errorf("claimed once its owner is gone: %v", err)
	}
	if err := other.DropPause(ctx, "q_2"); err != nil {
		t.Fatal(err)
	}
}
