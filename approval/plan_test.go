package approval

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/budget/sqlite"
)

// TestPlanAskedOnceThenCovers: a plan is put to the person as one question showing every
// effect; accepted, it is recorded approved by who answered for the plan window, and each of
// its effects then answers one program call of the same tool and arguments (never a direct
// call, never another agent's, never a call whose arguments differ); declined, it covers none.
func TestPlanAskedOnceThenCovers(t *testing.T) {
	ctx := context.Background()
	led, err := sqlite.Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	plan := func() budget.Plan {
		p := budget.Plan{ID: budget.NewID("p_"), Tenant: "t", Agent: "a", ExecutionID: "x"}
		for i, o := range []string{"o1", "o2"} {
			p.Effects = append(p.Effects, budget.PlanEffect{Seq: i + 1, Tool: "shop__refund", Arguments: json.RawMessage(`{"order_id":"` + o + `"}`),
				StandIn: json.RawMessage("null"), View: "  order_id = \"" + o + "\"\n"})
		}
		if err := led.SavePlan(ctx, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	call := func(view string, inProgram bool) Question {
		return Question{Tool: "shop__refund", Arguments: view, InProgram: inProgram, Call: budget.NewID("c_")}
	}
	covered := Covered(led, "t", "a")

	p := &person{action: Decline}
	declined := plan()
	a := &Asking{Asker: p, Tenant: "t", Agent: "a", Timeout: time.Minute, PlanWindow: time.Hour}
	if d, fe := a.AskPlan(ctx, led, declined); d != Declined || fe == nil || !strings.Contains(fe.Message, "declined the plan") {
		t.Fatalf("declined plan: %v %v", d, fe)
	}
	if _, ok := covered.Answer(ctx, call(declined.Effects[0].View, true)); ok {
		t.Fatal("a declined plan answered a call")
	}

	p.action = Accept
	accepted := plan()
	before := time.Now()
	if d, fe := a.AskPlan(ctx, led, accepted); d != Accepted || fe != nil {
		t.Fatalf("accepted plan: %v %v", d, fe)
	}
	if len(p.asked) != 2 {
		t.Fatalf("asked %d questions, want one per plan", len(p.asked))
	}
	msg := p.asked[1].Message()
	for _, want := range []string{"Approve the plan " + accepted.ID, "1. shop__refund\n  order_id = \"o1\"\n2. shop__refund\n  order_id = \"o2\"\n", "2 calls"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the plan's question %q lacks %q", msg, want)
		}
	}
	kept, err := led.Plan(ctx, "t", accepted.ID)
	if err != nil || kept.ApprovedBy != "ann" || kept.Until.Before(before.Add(time.Hour)) {
		t.Fatalf("kept plan %+v, %v: want approved by ann for an hour", kept, err)
	}
	o1 := accepted.Effects[0].View
	if _, ok := covered.Answer(ctx, call(o1, false)); ok {
		t.Error("a plan answered a direct call")
	}
	if _, ok := Covered(led, "t", "b").Answer(ctx, call(o1, true)); ok {
		t.Error("a plan answered another agent's call")
	}
	if _, ok := covered.Answer(ctx, call("  order_id = \"o3\"\n", true)); ok {
		t.Error("a plan answered a call it does not list")
	}
	if ans, ok := Standings(nil, covered).Answer(ctx, call(o1, true)); !ok || ans.Action != Accept || ans.By != ByPlan+accepted.ID {
		t.Errorf("the plan's call: %+v %v, want accepted by the plan", ans, ok)
	}
	if _, ok := covered.Answer(ctx, call(o1, true)); ok {
		t.Error("one effect answered two calls")
	}
}
