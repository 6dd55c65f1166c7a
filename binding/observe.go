package binding

import (
	"context"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
)

// observation is what the operator sees of one binding call: its span (under the run_code's,
// and the parent of the upstream call's) and, when it ends, its metrics, all read off the
// answer so the walk itself carries no hooks: the outcome, a budget refusal and the meter it
// names, a result kept under a handle. (Approval decisions are counted by the approval step,
// which direct calls take too.)
type observation struct {
	x        *Execution
	span     telemetry.Span
	start    time.Time
	upstream string
}

// observe starts one call's span. The tool's name is in the span only when it is a built-in
// or a tool this execution's turn holds: a name a program made up never is.
func (x *Execution) observe(ctx context.Context, name string) (context.Context, observation) {
	up, known := telemetry.UpstreamUnknown, false
	switch name {
	case BuiltinListTools, BuiltinGetToolInfo, BuiltinReadToolOutput, BuiltinBudgetRemaining, "run_code":
		up, known = telemetry.UpstreamBuiltin, true
	default:
		if s := x.turn.Server(name); s != "" {
			up = s
			_, fe := x.turn.Lookup(name)
			known = fe == nil || fe.Kind == failure.Denied
		}
	}
	span := "binding"
	attrs := []telemetry.Attr{telemetry.String("mcp_sandbox.upstream", up)}
	if known {
		span += " " + name
		attrs = append(attrs, telemetry.String("gen_ai.tool.name", name))
	}
	ctx, s := telemetry.Start(ctx, span, telemetry.Internal, attrs...)
	return ctx, observation{x: x, span: s, start: time.Now(), upstream: up}
}

// end ends the span and counts the call.
func (o observation) end(rep toolcall.Answer) {
	r := o.x.report
	outcome := "ok"
	if rep.Kind != "" {
		outcome = string(rep.Kind)
	}
	switch rep.Kind {
	case failure.BudgetExceeded, failure.ArgumentTooLarge:
		if meter, half := budget.RefusedMeter(rep.Message); meter != "" {
			r.BudgetRefusal(meter, half)
		}
	}
	if rep.Handle != nil {
		r.Kept("binding", rep.Handle.Size)
		o.span.Set(telemetry.Int("mcp_sandbox.handle_bytes", rep.Handle.Size))
	}
	r.Call(telemetry.Call{Upstream: o.upstream, Outcome: outcome, Seconds: time.Since(o.start).Seconds()})
	o.span.End(string(rep.Kind))
}
