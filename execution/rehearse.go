package execution

import (
	"context"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/approval"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

// PlanApproval is what became of a rehearsal's plan (docs/design.md §22): the decision on it
// (approval.Decision: accepted, declined, timed_out, unasked, failed), who approved it and
// until when it covers the calls of a real run, or why it covers none.
type PlanApproval struct {
	Decision string    `json:"decision"`
	By       string    `json:"by,omitempty"`
	Until    time.Time `json:"until,omitzero"`
	Message  string    `json:"message,omitempty"`
}

// approvePlan keeps the calls a rehearsal listed (effects) as a plan of the program's tenant
// and agent in plans, and puts it to the person through asking (approval.Asking.AskPlan):
// the plan's id and what became of it. A rehearsal that listed nothing has nothing to
// approve; without a ledger nothing keeps the plan, so nothing can approve it.
func approvePlan(ctx context.Context, plans budget.Plans, asking *approval.Asking, p Program, executionID string, effects []budget.PlanEffect) (string, *PlanApproval) {
	if len(effects) == 0 {
		return "", nil
	}
	if plans == nil {
		return "", &PlanApproval{Decision: string(approval.Unasked), Message: "no run ledger keeps plans here, so this plan cannot be approved; each of its calls is asked about as usual"}
	}
	agent := ""
	if asking != nil {
		agent = asking.Agent
	}
	plan := budget.Plan{ID: budget.NewID("p_"), Tenant: p.Run.Tenant, Agent: agent, ExecutionID: executionID, Effects: effects}
	if err := plans.SavePlan(ctx, plan); err != nil {
		return "", &PlanApproval{Decision: string(approval.Failed), Message: "the plan could not be kept in the run ledger, so it cannot be approved: " + err.Error()}
	}
	d, fe := asking.AskPlan(ctx, plans, plan)
	pa := &PlanApproval{Decision: string(d)}
	if fe != nil {
		pa.Message = fe.Message
		return plan.ID, pa
	}
	if kept, err := plans.Plan(ctx, plan.Tenant, plan.ID); err == nil {
		pa.By, pa.Until = kept.ApprovedBy, kept.Until.UTC()
	}
	return plan.ID, pa
}
