package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/budget/sqlite"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// refunds is a program refunding orders o<from>..o<to>, each for the amount the read-only
// order tool says, except those in changed, refunded for the amount given there.
func refunds(from, to int, changed map[int]int) string {
	m := map[string]int{}
	for k, n := range changed {
		m[fmt.Sprint(k)] = n
	}
	amounts, _ := json.Marshal(m)
	return fmt.Sprintf(`
changed = %s
out = []
for i in range(%d, %d):
    o = await shop__order(order_id=f"o{i}")
    try:
        r = await shop__refund(order_id=o["order_id"], amount=changed.get(str(i), o["amount"]))
        out.append(r["refunded"])
    except ToolError as e:
        out.append(e.kind)
return out
`, amounts, from, to+1)
}

// rehearsal is what the tests read of a rehearsal's result.
type rehearsal struct {
	Rehearsed bool `json:"rehearsed"`
	Plan      []struct {
		Seq       int             `json:"seq"`
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
		StandIn   json.RawMessage `json:"stand_in"`
	} `json:"plan"`
	PlanID       string `json:"plan_id"`
	PlanApproval struct {
		Decision string `json:"decision"`
		By       string `json:"by"`
	} `json:"plan_approval"`
	Value json.RawMessage `json:"value"`
}

// rehearse runs code with run_code rehearse: true and returns what the model read.
func rehearse(t *testing.T, cs *mcp.ClientSession, code string) rehearsal {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": code, "rehearse": true}})
	if err != nil {
		t.Fatalf("run_code rehearse: %v", err)
	}
	var r rehearsal
	if b, err := structured(res, &r); err != nil || res.IsError {
		t.Fatalf("rehearsal result %s: %v", b, err)
	}
	return r
}

// Issue 42, Must show 4 and 5: a program that would refund 20 orders (refund is destructive,
// so each call needs a person's approval) rehearses: the read-only order calls run, no refund
// is made, the result lists the 20 refunds with their arguments and stand-ins, and the person
// is asked once, about the whole plan. Accepted, the real run refunds all 20 without a
// question, and a 21st refund the plan does not list is asked about. Then a plan of three
// whose program changes one amount before the real run: only that call is asked. The ledger
// keeps each plan, who approved it and the calls it covered. An operator may approve a plan
// instead of the person (`mcp-sandbox approvals approve`).
func TestRehearsalPlanApprovedAtOnce(t *testing.T) {
	dir := t.TempDir()
	counter, dataDir := filepath.Join(dir, "counter.json"), filepath.Join(dir, "data")
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
data_dir: %[3]q
`+processProfile+`    hard_limits: {wall_seconds: 90}
    approvals: {timeout_seconds: 30, plan_seconds: 600}
upstreams:
  shop: {command: [%[1]q, "--shop"], env: {MOCK_COUNTER_FILE: %[2]q}}
tenants:
  t:
    upstreams: [shop]
    agents:
      default:
        code_execution: {limits: {wall_seconds: 90}}
`, built.mock, counter, dataDir))
	cs, p, _ := servePerson(t, cfg)
	p.set("accept", nil)

	r := rehearse(t, cs, refunds(1, 20, nil))
	if n := counts(t, counter); n["refund"] != 0 || n["order"] != 20 {
		t.Fatalf("rehearsal: the mock ran %v; want order 20 times (read-only) and refund never", n)
	}
	if !r.Rehearsed || len(r.Plan) != 20 || r.PlanID == "" || r.PlanApproval.Decision != "accepted" || r.PlanApproval.By != "ann@example.com" {
		t.Fatalf("rehearsal result: %+v", r)
	}
	for i, e := range r.Plan {
		want := fmt.Sprintf(`{"amount":%d,"order_id":"o%d"}`, 10*len(fmt.Sprintf("o%d", i+1)), i+1)
		if e.Seq != i+1 || e.Tool != "shop__refund" || string(e.Arguments) != want || string(e.StandIn) != `{"amount":0,"order_id":"","refunded":false}` {
			t.Errorf("plan[%d] = seq %d %s %s stand-in %s; want %s", i, e.Seq, e.Tool, e.Arguments, e.StandIn, want)
		}
	}
	if string(r.Value) != "["+strings.TrimSuffix(strings.Repeat("false,", 20), ",")+"]" {
		t.Errorf("rehearsal value %s: want the stand-ins' refunded, false each", r.Value)
	}
	qs := p.questions()
	if len(qs) != 1 || !strings.Contains(qs[0], "Approve the plan "+r.PlanID) || !strings.Contains(qs[0], "20. shop__refund\n  amount = 30\n  order_id = \"o20\"\n") {
		t.Fatalf("the person was asked %q; want once, about the whole plan", qs)
	}

	// The real run: the 20 planned refunds go without a question; a 21st is asked (declined).
	p.set("decline", nil)
	var got []any
	runInto(t, cs, "rehearse-real", refunds(1, 21, nil), &got, &struct{}{})
	if n := counts(t, counter)["refund"]; n != 20 {
		t.Errorf("real run: the mock refunded %d times, want the plan's 20", n)
	}
	if len(got) != 21 || got[19] != true || got[20] != "denied" {
		t.Errorf("real run's value %v: want 20 refunded, the 21st denied", got)
	}
	if qs := p.questions(); len(qs) != 2 || !strings.Contains(qs[1], "order_id = \"o21\"") {
		t.Errorf("real run: the person was asked %d questions in all, want one more, about o21: %q", len(qs), qs[1:])
	}

	// Must show 5: a plan of three; the program then changes o32's amount.
	p.set("accept", nil)
	r2 := rehearse(t, cs, refunds(31, 33, nil))
	if len(r2.Plan) != 3 || r2.PlanApproval.Decision != "accepted" {
		t.Fatalf("second rehearsal: %+v", r2)
	}
	p.set("decline", nil)
	got = nil
	runInto(t, cs, "", refunds(31, 33, map[int]int{32: 999}), &got, &struct{}{})
	if len(got) != 3 || got[0] != true || got[1] != "denied" || got[2] != true {
		t.Errorf("changed run's value %v: want o31 and o33 refunded, o32 (changed) asked and declined", got)
	}
	qs = p.questions()
	if len(qs) != 4 || !strings.Contains(qs[3], "amount = 999") || !strings.Contains(qs[3], `order_id = "o32"`) {
		t.Errorf("changed run: questions %q; want one more, about o32 at 999", qs[2:])
	}

	// An operator approves a plan while the person has not answered: the question the
	// operator lists shows every effect, and the real run then asks nobody.
	p.set("", func() {
		pending := operatorPending(t, cfg)
		if len(pending) != 1 || pending[0].Tool != "run_code" || !strings.Contains(pending[0].Arguments, "1. shop__refund\n  amount = 30\n  order_id = \"o41\"\n") {
			t.Errorf("the operator's pending approvals: %+v", pending)
			return
		}
		if out, err := exec.Command(built.sandbox, "approvals", "approve", pending[0].ID, "--by", "ops@example.com", "--config", cfg).CombinedOutput(); err != nil {
			t.Errorf("approvals approve: %v\n%s", err, out)
		}
	})
	r3 := rehearse(t, cs, refunds(41, 41, nil))
	if r3.PlanApproval.Decision != "accepted" || r3.PlanApproval.By != "ops@example.com" {
		t.Fatalf("a plan the operator approved: %+v", r3.PlanApproval)
	}
	asked := len(p.questions())
	got = nil
	runInto(t, cs, "", refunds(41, 41, nil), &got, &struct{}{})
	if len(got) != 1 || got[0] != true || len(p.questions()) != asked {
		t.Errorf("the operator's plan: the real run returned %v after %d more questions; want refunded, none", got, len(p.questions())-asked)
	}

	// A plan stands for the agent's real runs from any session, one that cannot ask included:
	// the planned call runs there, and one the plan does not list is refused unasked.
	p.set("accept", nil)
	if r := rehearse(t, cs, refunds(51, 51, nil)); r.PlanApproval.Decision != "accepted" {
		t.Fatalf("a fourth rehearsal: %+v", r)
	}
	mute, _ := serveProcWith(t, cfg, testkit.NewLog(t, "mute"), &mcp.ClientOptions{}, revisionElicit)
	got = nil
	runInto(t, mute, "", refunds(51, 52, nil), &got, &struct{}{})
	if len(got) != 2 || got[0] != true || got[1] != "approval_required_in_program" {
		t.Errorf("a session that cannot ask: %v; want o51 refunded by the plan, o52 refused unasked", got)
	}

	// A client of 2026-07-28 is asked the plan through an input request: the rehearsal comes
	// back input_required, nothing refunded; the client's retry accepts it, and its real run
	// refunds without a question.
	mrtr, _ := serveProcWith(t, cfg, testkit.NewLog(t, "mrtr"), &mcp.ClientOptions{
		ElicitationHandler: newPerson().handler, MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	params := &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": refunds(61, 62, nil), "rehearse": true}}
	res, err := mrtr.CallTool(ctx, params)
	if err != nil || !res.NeedsInput() || len(res.InputRequests) != 1 || counts(t, counter)["refund"] != 24 {
		t.Fatalf("a rehearsal for a client of 2026-07-28: %v %+v; want input_required, nothing refunded", err, res)
	}
	retry := *params
	retry.RequestState, retry.InputResponses = res.RequestState, mcp.InputResponseMap{}
	for id, ir := range res.InputRequests {
		if e, ok := ir.(*mcp.ElicitParams); !ok || !strings.Contains(e.Message, "2. shop__refund\n  amount = 30\n  order_id = \"o62\"\n") {
			t.Fatalf("the input request %+v; want the plan's question", ir)
		}
		retry.InputResponses[id] = &mcp.ElicitResult{Action: "accept", Meta: mcp.Meta{"mcp-sandbox/answered_by": "bob@example.com"}}
	}
	if res, err = mrtr.CallTool(ctx, &retry); err != nil {
		t.Fatal(err)
	}
	var r5 rehearsal
	if b, err := structured(res, &r5); err != nil || len(r5.Plan) != 2 || r5.PlanApproval.Decision != "accepted" || r5.PlanApproval.By != "bob@example.com" {
		t.Fatalf("the retried rehearsal: %s %v", b, err)
	}
	got = nil
	runInto(t, mrtr, "", refunds(61, 62, nil), &got, &struct{}{})
	if len(got) != 2 || got[0] != true || got[1] != true {
		t.Errorf("the real run after a plan accepted by input request: %v; want both refunded, unasked", got)
	}

	// The ledger: each plan, who approved it, and the calls it covered.
	led, err := sqlite.Open(context.Background(), dataDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	for _, c := range []struct {
		id, by  string
		covered []bool
	}{{r.PlanID, "ann@example.com", repeat(true, 20)}, {r2.PlanID, "ann@example.com", []bool{true, false, true}}, {r5.PlanID, "bob@example.com", []bool{true, true}}} {
		plan, err := led.Plan(context.Background(), "t", c.id)
		if err != nil {
			t.Fatal(err)
		}
		if plan.ApprovedBy != c.by || plan.Agent != "default" || !plan.Until.After(time.Now()) || len(plan.Effects) != len(c.covered) {
			t.Errorf("ledger plan %s: %+v", c.id, plan)
			continue
		}
		for i, e := range plan.Effects {
			if (e.CoveredCall != "") != c.covered[i] {
				t.Errorf("ledger plan %s effect %d covers %q; want covered %v", c.id, e.Seq, e.CoveredCall, c.covered[i])
			}
		}
	}
	if n := counts(t, counter)["refund"]; n != 26 {
		t.Errorf("the mock refunded %d times in all, want 26", n)
	}
	recs := approvalsOf(t, dataDir, "rehearse-real")
	if len(recs) != 21 || recs[20].Status != budget.ApprovalDeclined || recs[20].AnsweredBy != "ann@example.com" {
		t.Fatalf("ledger approvals of the real run: %s", decisions(recs))
	}
	for _, a := range recs[:20] {
		if a.Status != budget.ApprovalAccepted || a.AnsweredBy != "plan "+r.PlanID || a.Tool != "shop__refund" {
			t.Errorf("ledger approval %+v: want accepted by the plan", a)
		}
	}
}

func repeat[T any](v T, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = v
	}
	return out
}
