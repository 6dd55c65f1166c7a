package approval

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// A rehearsed program's plan is one more question here (docs/design.md §22): put to the person
// (or an operator) whole, as one question, once the rehearsal has ended; approved, it stands
// as the answer (Covered) to each later call of its agent that matches one of its effects,
// each effect once, until its time ends.

// DefaultPlanWindow is how long an approved plan covers calls when Asking.PlanWindow is zero:
// the profile's approvals.plan_seconds default.
const DefaultPlanWindow = 10 * time.Minute

// PlanTool is the tool a plan's question names: the run_code that rehearsed it.
const PlanTool = "run_code"

// AskPlan puts plan p, which store keeps, to the person through a (its Asker, Room and wait)
// as one question showing every effect in full; accepted, the plan is recorded approved by
// whoever answered, covering matching calls for a.PlanWindow. The decision is returned, with
// a refusal saying why when it is not Accepted.
func (a *Asking) AskPlan(ctx context.Context, store budget.Plans, p budget.Plan) (Decision, *failure.Error) {
	within := DefaultPlanWindow
	if a != nil && a.PlanWindow > 0 {
		within = a.PlanWindow
	}
	q := Question{Tool: PlanTool, Plan: p.ID, Arguments: PlanView(p.Effects), Redacted: p.ID,
		Reasons: []string{fmt.Sprintf("a rehearsed program would make these %d calls; approved, a real run within %s makes each without asking again",
			len(p.Effects), within.Round(time.Second))}}
	ans, d, fe := a.askWhole(ctx, q, "approve the plan")
	if fe != nil {
		return d, fe
	}
	if d != Accepted {
		return d, wholeRefusal(d, "the plan", "approve the plan", "each of its calls is asked about as usual")
	}
	by := ans.By
	if by == "" {
		by = "person"
	}
	if err := store.ApprovePlan(context.WithoutCancel(ctx), a.Tenant, p.ID, by, time.Now().Add(within)); err != nil {
		return Failed, failure.Wrap(failure.UpstreamError, err, "the plan was accepted but its approval could not be recorded, so it covers no call")
	}
	return Accepted, nil
}

// askWhole puts q, a question about something other than one call (a plan, a proposal), to
// the person through a, as one question kept in the Room like any other (an operator may
// answer it), which no program is ever run again from. what completes "nobody was asked to
// ...". The decision is counted for the operator.
func (a *Asking) askWhole(ctx context.Context, q Question, what string) (Answer, Decision, *failure.Error) {
	if a == nil || a.Asker == nil {
		return Answer{}, Unasked, failure.New(failure.ApprovalRequiredInProgram, "nobody was asked to %s: nothing connects this host to a person", what)
	}
	if ok, why := a.Asker.CanAsk(); !ok {
		return Answer{}, Unasked, failure.New(failure.ApprovalRequiredInProgram, "nobody was asked to %s: this host cannot ask for it: %s", what, why)
	}
	q.Wait = a.timeout()
	asked := &Asking{Asker: a.Asker, Room: a.room(), Timeout: a.Timeout, PlanWindow: a.PlanWindow, Report: a.Report, Tenant: a.Tenant,
		Agent: a.Agent, Run: a.Run, Hold: a.Hold, Journal: unresumable{}}
	ans, err, lapsed := asked.answer(ctx, q)
	d := decision(ans, err, lapsed)
	a.report(d)
	return ans, d, nil
}

// SaveProposal is what the model proposes to save as a program (package programs checks and
// saves it): its name, description and whole text, as the person reads them.
type SaveProposal struct {
	Name, Description, Code string
}

// AskSave puts the model's proposal to save a program to the person (or an operator) as one
// question showing its whole text: who answered, and the decision; a refusal says why it was
// not accepted. Nothing is saved here: the caller saves an accepted proposal.
func (a *Asking) AskSave(ctx context.Context, p SaveProposal) (by string, _ Decision, _ *failure.Error) {
	var view strings.Builder
	fmt.Fprintf(&view, "  name = %q\n  description = %q\n  code, in full:\n", p.Name, p.Description)
	for _, l := range strings.Split(strings.TrimSuffix(p.Code, "\n"), "\n") {
		fmt.Fprintf(&view, "  | %s\n", l)
	}
	q := Question{Tool: SaveTool, Proposal: p.Name, Arguments: view.String(), Redacted: p.Name,
		Reasons: []string{"the assistant proposes saving a program as a tool its agent can call by name"}}
	ans, d, fe := a.askWhole(ctx, q, "accept saving the program")
	switch {
	case fe != nil:
		return "", d, fe
	case d == Accepted:
		return ans.By, d, nil
	}
	return "", d, wholeRefusal(d, "saving the program "+p.Name, "save the program "+p.Name, "nothing was saved")
}

// SaveTool is the built-in a proposal to save a program comes through (its question names it).
const SaveTool = "save_program"

// wholeRefusal says why a question asked whole (askWhole) was not accepted, by decision d:
// declined names what the person declined, request what they were asked to do, and after
// what follows from the refusal.
func wholeRefusal(d Decision, declined, request, after string) *failure.Error {
	switch d {
	case Declined, Cancelled:
		return failure.New(failure.Denied, "the person declined %s; %s", declined, after)
	case TimedOut:
		return failure.New(failure.ApprovalRequiredInProgram, "nobody answered the request to %s in time; %s", request, after)
	}
	return failure.New(failure.ApprovalRequiredInProgram, "the request to %s got no answer from the host; %s", request, after)
}

// PlanView is what a person reads of a plan's effects: each numbered, with its tool and every
// argument in full (the view each effect's question would show).
func PlanView(effects []budget.PlanEffect) string {
	var b strings.Builder
	for _, e := range effects {
		fmt.Fprintf(&b, "%d. %s\n%s", e.Seq, e.Tool, e.View)
	}
	return b.String()
}

// Covered is the standing answer of the plans store keeps for tenant's agent: a question
// about a program's call matching an effect of an approved plan still in force (same tool,
// same arguments as shown) is accepted by the plan, and the effect records the call it
// covered. A host's direct call is never covered: a plan is a program's.
func Covered(store budget.Plans, tenant, agent string) Standing {
	return &covered{store: store, tenant: tenant, agent: agent}
}

type covered struct {
	store         budget.Plans
	tenant, agent string
}

func (c *covered) Answer(ctx context.Context, q Question) (Answer, bool) {
	if q.Plan != "" || q.Call == "" || !q.InProgram {
		return Answer{}, false
	}
	id, err := c.store.CoverCall(ctx, c.tenant, c.agent, q.Tool, q.Arguments, q.Call, time.Now())
	if err != nil {
		return Answer{}, false
	}
	return Answer{Action: Accept, By: ByPlan + id}, true
}

// ByPlan begins who answered a call a plan covered, followed by the plan's id.
const ByPlan = "plan "

// Standings is the first standing answer of list's that answers.
func Standings(list ...Standing) Standing { return standings(list) }

type standings []Standing

func (s standings) Answer(ctx context.Context, q Question) (Answer, bool) {
	for _, st := range s {
		if st == nil {
			continue
		}
		if a, ok := st.Answer(ctx, q); ok {
			return a, true
		}
	}
	return Answer{}, false
}

// unresumable is the journal of a question no program is run again from.
type unresumable struct{}

func (unresumable) Paused(int) (json.RawMessage, bool) { return nil, false }
