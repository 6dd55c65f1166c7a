package execution

import (
	"context"
	"log/slog"

	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
)

// observe reports one execution that ended, refusals included: its metrics, its span's
// attributes and the log line that says how it ended ("run_code", whichever command asked),
// on the execution's logger. It returns res.
func observe(ctx context.Context, spec *Spec, res *Result, report telemetry.Reporter, log *slog.Logger) *Result {
	e := telemetry.Execution{Profile: spec.Profile, Level: string(res.Isolation), Outcome: "completed",
		Start: res.Start, Seconds: res.DurationSeconds, Context: res.Context.Execution}
	if f := res.Failure; f != nil {
		e.Outcome, e.Kind = "failed", string(f.Kind)
		if !f.Executed {
			e.Outcome, e.Level = "refused", "none"
		}
	}
	if e.Start == "" { // no child of ours: refused before one, or a backend that does not say (remote)
		e.Start = "none"
		if e.Outcome != "refused" {
			e.Start = "unknown"
		}
	}
	if n := res.Network; n != nil {
		e.EgressAllowed = n.Allowed
		e.EgressRefused = map[string]int{}
		for _, r := range n.Refused {
			e.EgressRefused[r.Reason]++
		}
	}
	report.Execution(e)
	telemetry.Current(ctx).Set(telemetry.String("mcp_sandbox.profile", e.Profile), telemetry.String("mcp_sandbox.isolation", e.Level),
		telemetry.String("mcp_sandbox.outcome", e.Outcome), telemetry.String("mcp_sandbox.start", e.Start))
	attrs := []any{"duration_seconds", res.DurationSeconds, "cancelled", res.Cancelled, "outcome", e.Outcome}
	if res.Failure != nil {
		attrs = append(attrs, "failure", string(res.Failure.Kind))
	}
	if n := res.Network; n != nil {
		attrs = append(attrs, "network_allowed", n.Allowed, "network_refused", len(n.Refused),
			"network_bytes_in", n.BytesIn, "network_bytes_out", n.BytesOut)
	}
	log.Info("run_code", attrs...)
	return res
}
