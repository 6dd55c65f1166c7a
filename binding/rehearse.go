package binding

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

// A rehearsal (docs/design.md §22) runs a program with every call of a tool that is not
// read-only by its annotations listed instead of made: the program gets a stand-in value
// (upstream.Turn.StandIn) and goes on. Read-only calls are made as usual. Such a call has
// passed policy, bindings and its arguments' check (hops 2 to 4) and is denied by an
// argument rule as the real call would be; it asks nobody and spends nothing.

// rehearsal is what a rehearsal's calls would have done, in the order they came.
type rehearsal struct {
	mu      sync.Mutex
	effects []budget.PlanEffect
}

// rehearse lists the call of tool with args (checked) and answers it with a stand-in.
func (x *Execution) rehearse(ctx context.Context, tool *upstream.Tool, args json.RawMessage) toolcall.Answer {
	if _, fe := x.turn.Approval(tool, args); fe != nil {
		return toolcall.Refused(fe)
	}
	view, _ := tool.ApprovalView(args, maxQuestionArguments)
	standIn := x.turn.StandIn(ctx, tool)
	r := x.rehearsal
	r.mu.Lock()
	r.effects = append(r.effects, budget.PlanEffect{Seq: len(r.effects) + 1, Tool: tool.Name, Arguments: args, StandIn: standIn, View: view})
	r.mu.Unlock()
	return toolcall.Answer{Value: standIn}
}

// Plan returns the calls a rehearsal listed instead of making, in order; nil when the
// execution is no rehearsal, or made no such call.
func (x *Execution) Plan() []budget.PlanEffect {
	if x.rehearsal == nil {
		return nil
	}
	x.rehearsal.mu.Lock()
	defer x.rehearsal.mu.Unlock()
	return append([]budget.PlanEffect(nil), x.rehearsal.effects...)
}
