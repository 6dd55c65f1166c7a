package budget

import (
	"context"
	"encoding/json"
	"time"
)

// Plan is what a rehearsed program would have done (docs/design.md §22): the calls of tools that
// are not read-only, which the rehearsal listed instead of sending, in order. Once approved,
// until Until the real runs of its tenant's agent make each listed call without asking again,
// each effect covering one call.
type Plan struct {
	ID          string // NewID("p_")
	Tenant      string
	Agent       string
	ExecutionID string // the rehearsal's
	Effects     []PlanEffect
	CreatedAt   time.Time // set by the ledger
	// ApprovedBy is who approved the plan ("" while it is not); Until ends its cover.
	ApprovedBy string
	ApprovedAt time.Time
	Until      time.Time
}

// PlanEffect is one call a rehearsal listed instead of sending.
type PlanEffect struct {
	Seq  int    `json:"seq"`
	Tool string `json:"tool"`
	// Arguments are the call's arguments in full, as the tool would have received them.
	Arguments json.RawMessage `json:"arguments"`
	// StandIn is the value the program got instead of the tool's.
	StandIn json.RawMessage `json:"stand_in"`
	// View is the arguments as a person asked about the call is shown them
	// (approval.Question.Arguments): what a later call is matched by.
	View string `json:"-"`
	// CoveredCall is the call of a real run this effect let through without asking ("" while
	// none has); CoveredAt when.
	CoveredCall string    `json:"covered_call,omitempty"`
	CoveredAt   time.Time `json:"-"`
}

// Plans keep rehearsals' plans, their approval and the calls they covered: a part of Ledger.
// Safe for concurrent use, by several processes sharing the ledger: an effect covers one call
// however many replicas ask at once.
type Plans interface {
	// SavePlan keeps p, not yet approved.
	SavePlan(ctx context.Context, p Plan) error
	// ApprovePlan records that by approved the plan id of tenant, covering calls until until.
	// ErrNotFound for a plan the tenant does not have.
	ApprovePlan(ctx context.Context, tenant, id, by string, until time.Time) error
	// CoverCall finds an effect of an approved plan of tenant's agent, still in force at now and
	// not yet covering a call, whose tool and view are these, and records that it covers call:
	// the plan's id, or ErrNotFound when there is none.
	CoverCall(ctx context.Context, tenant, agent, tool, view, call string, now time.Time) (planID string, _ error)
	// Plan returns the plan id of tenant with its effects in order, or ErrNotFound.
	Plan(ctx context.Context, tenant, id string) (Plan, error)
}
