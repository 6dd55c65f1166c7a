package ledgertest

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

// contractPlans: a plan is kept with its effects in order; it covers nothing until approved,
// then each effect covers one call of its tool and view, of its tenant's agent, until its
// time ends, however many callers ask at once; another handle (co) sees and covers the same.
func contractPlans(t *testing.T, cl, co budget.Ledger) {
	ctx := t.Context()
	p := budget.Plan{ID: budget.NewID("p_"), Tenant: "t", Agent: "a", ExecutionID: "x1"}
	for i, order := range []string{"o1", "o2", "o2"} {
		args := json.RawMessage(`{"order_id":"` + order + `"}`)
		p.Effects = append(p.Effects, budget.PlanEffect{Seq: i + 1, Tool: "shop__refund", Arguments: args, StandIn: json.RawMessage("null"), View: order})
	}
	if err := cl.SavePlan(ctx, p); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := co.CoverCall(ctx, "t", "a", "shop__refund", "o1", "c0", now); !errors.Is(err, budget.ErrNotFound) {
		t.Fatalf("CoverCall before approval = %v, want ErrNotFound", err)
	}
	if err := cl.ApprovePlan(ctx, "u", p.ID, "ann", now.Add(time.Hour)); !errors.Is(err, budget.ErrNotFound) {
		t.Errorf("ApprovePlan by another tenant = %v, want ErrNotFound", err)
	}
	if err := cl.ApprovePlan(ctx, "t", p.ID, "ann", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, other := range [][3]string{{"u", "a", "o1"}, {"t", "b", "o1"}, {"t", "a", "o3"}} {
		if _, err := co.CoverCall(ctx, other[0], other[1], "shop__refund", other[2], "cx", now); !errors.Is(err, budget.ErrNotFound) {
			t.Errorf("CoverCall(%v) = %v, want ErrNotFound", other, err)
		}
	}
	if _, err := co.CoverCall(ctx, "t", "a", "shop__refund", "o1", "cl", now.Add(2*time.Hour)); !errors.Is(err, budget.ErrNotFound) {
		t.Errorf("CoverCall after the plan's time = %v, want ErrNotFound", err)
	}
	// o2 is planned twice: of four callers at once, two are covered.
	var wg sync.WaitGroup
	covered := make(chan string, 4)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := cl
			if i%2 == 1 {
				l = co
			}
			id, err := l.CoverCall(ctx, "t", "a", "shop__refund", "o2", "c2-"+string(rune('a'+i)), now)
			switch {
			case err == nil && id == p.ID:
				covered <- id
			case !errors.Is(err, budget.ErrNotFound):
				t.Errorf("CoverCall(o2) = %q, %v", id, err)
			}
		}()
	}
	wg.Wait()
	if n := len(covered); n != 2 {
		t.Errorf("o2 covered %d calls, want 2", n)
	}
	if id, err := cl.CoverCall(ctx, "t", "a", "shop__refund", "o1", "c1", now); err != nil || id != p.ID {
		t.Fatalf("CoverCall(o1) = %q, %v; want %s", id, err, p.ID)
	}
	got, err := co.Plan(ctx, "t", p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ApprovedBy != "ann" || got.Agent != "a" || got.ExecutionID != "x1" || got.Until.Before(now) || len(got.Effects) != 3 {
		t.Fatalf("Plan = %+v", got)
	}
	for i, e := range got.Effects {
		if e.Seq != i+1 || e.CoveredCall == "" || string(e.Arguments) != string(p.Effects[i].Arguments) || e.View != p.Effects[i].View {
			t.Errorf("effect %d = %+v, want %+v covered", i, e, p.Effects[i])
		}
	}
	if got.Effects[0].CoveredCall != "c1" {
		t.Errorf("effect 1 covers %q, want c1", got.Effects[0].CoveredCall)
	}
	if _, err := cl.Plan(ctx, "u", p.ID); !errors.Is(err, budget.ErrNotFound) {
		t.Errorf("Plan of another tenant = %v, want ErrNotFound", err)
	}
}
