package binding

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

// The built-ins a program may call besides upstream tools.
const (
	BuiltinListTools      = "list_tools"
	BuiltinGetToolInfo    = "get_tool_info"
	BuiltinReadToolOutput = "read_tool_output"
	// BuiltinBudgetRemaining is what a program's budget.remaining() calls.
	BuiltinBudgetRemaining = "budget.remaining"
)

// excluded says why a built-in of the MCP face is not callable from a program.
var excluded = map[string]string{
	"run_code": "run_code cannot be called from a program: an execution must not start another execution.",
}

// builtin serves or refuses the names that are not upstream tools; ok is false for a name
// that is one ("<server>__<tool>"), which the rest of the walk takes.
func (x *Execution) builtin(ctx context.Context, name string, args json.RawMessage) (_ toolcall.Answer, ok bool) {
	switch name {
	case BuiltinListTools:
		var a upstream.ListToolsArgs
		if err := decodeStrict(args, &a); err != nil {
			return refuse(failure.InvalidArguments, "list_tools takes {server?, query?, cursor?}: %v", err), true
		}
		page, err := x.turn.ListTools(a)
		if err != nil {
			return refuse(failure.InvalidArguments, "%v", err), true
		}
		return x.metered(ctx, name, args, x.listing(a, page)), true
	case BuiltinGetToolInfo:
		var a struct {
			Name string `json:"name"`
		}
		if err := decodeStrict(args, &a); err != nil || a.Name == "" {
			return refuse(failure.InvalidArguments, "get_tool_info takes {name}"), true
		}
		if info, ok := x.nestedInfo(a.Name); ok {
			return x.metered(ctx, name, args, info), true
		}
		info, fe := x.turn.ToolInfo(ctx, a.Name)
		if fe != nil {
			return toolcall.Refused(fe), true
		}
		return x.metered(ctx, name, args, info), true
	case BuiltinReadToolOutput:
		var a ReadArgs
		if err := json.Unmarshal(args, &a); err != nil {
			return refuse(failure.InvalidArguments, "read_tool_output takes {handle, offset?, limit?, pattern?}"), true
		}
		return x.read(ctx, a), true
	case BuiltinBudgetRemaining:
		if err := decodeStrict(args, &struct{}{}); err != nil {
			return refuse(failure.InvalidArguments, "budget.remaining takes no arguments"), true
		}
		b, err := json.Marshal(x.remaining(ctx))
		if err != nil {
			return refuse(failure.UpstreamError, "the answer could not be encoded"), true
		}
		return toolcall.Answer{Value: b}, true
	}
	if why, no := excluded[name]; no {
		return refuse(failure.ExcludedBuiltin, "%s", why), true
	}
	if !strings.Contains(name, upstream.Separator) {
		return refuse(failure.Unavailable, "no tool named %q: a program may call upstream tools (<server>__<tool>), list_tools, get_tool_info, read_tool_output and budget.remaining", name), true
	}
	return toolcall.Answer{}, false
}

// Remaining is what is left of one binding budget (docs/design.md §10): nil where no ceiling
// is set (or, for seconds, no clock runs: a Run has none of its own).
type Remaining struct {
	Calls         *int64   `json:"calls"`
	TransferBytes *int64   `json:"transfer_bytes"`
	ProducedBytes *int64   `json:"produced_bytes"`
	Seconds       *float64 `json:"seconds"`
}

// remaining answers budget.remaining(): the execution's and the Run's budgets less what the
// meter has seen spent, and the seconds left of the execution's wall clock (the call's
// deadline). It reads no ledger and spends nothing, so asking costs only the asking.
func (x *Execution) remaining(ctx context.Context) map[string]Remaining {
	var exec, run Remaining
	if x.meter != nil {
		l := x.meter.Limits()
		used, runUsed := x.meter.Seen()
		left := func(limit, used int64) *int64 {
			if limit <= 0 {
				return nil
			}
			v := max(limit-used, 0)
			return &v
		}
		exec = Remaining{Calls: left(int64(l.MaxCalls), used.Calls), TransferBytes: left(l.MaxTotalBytes, used.TransferBytes),
			ProducedBytes: left(l.MaxProducedBytes, used.ProducedBytes)}
		run = Remaining{Calls: left(int64(l.MaxCalls), runUsed.Calls), TransferBytes: left(l.MaxTotalBytes, runUsed.TransferBytes),
			ProducedBytes: left(l.MaxProducedBytes, runUsed.ProducedBytes)}
	}
	if d, ok := ctx.Deadline(); ok {
		s := max(math.Round(time.Until(d).Seconds()*1000)/1000, 0)
		exec.Seconds = &s
	}
	return map[string]Remaining{"execution": exec, "run": run}
}

// metered answers a built-in call with v the way any call is answered (hops 6, 7, 9 and 10
// of the walk): in a call slot, admitted against the calls meter (tool_call_started is
// written under the built-in's name, and the call is spent), its answer's bytes reserved on
// the transfer meter, and tool_call_finished written. A request the built-in refuses
// (invalid arguments, an unknown or denied tool) was refused before this, unspent, as a tool
// call's policy and argument refusals are. An answer over what may still cross is refused,
// not cut: binding_result_too_large over max_result_bytes (narrow it: a server or a query),
// else budget_exceeded.
func (x *Execution) metered(ctx context.Context, name string, args json.RawMessage, v any) toolcall.Answer {
	b, err := json.Marshal(v)
	if err != nil {
		return refuse(failure.UpstreamError, "the answer could not be encoded")
	}
	release, fe := x.slot(ctx, name)
	if fe != nil {
		return toolcall.Refused(fe)
	}
	defer release()
	tk, fe := admit(ctx, x.meter, "", name, args)
	if fe != nil {
		return toolcall.Refused(fe)
	}
	if tk == nil {
		return toolcall.Answer{Value: b}
	}
	o := budget.CallFinish{Status: budget.Succeeded}
	rep := toolcall.Answer{Value: b}
	if tk.Reserve(budget.Usage{TransferBytes: int64(len(b))}) {
		o.Usage.TransferBytes = int64(len(b))
	} else if ceiling := x.meter.Limits().MaxResultBytes; ceiling > 0 && int64(len(b)) > ceiling {
		rep = refuse(failure.BindingResultTooLarge, "the answer of %s is %d bytes, over max_result_bytes (%d); narrow it (a server, a query)", name, len(b), ceiling)
	} else {
		rep = refuse(failure.BudgetExceeded, "the answer of %s is %d bytes, over what is left of the transfer budget (%d bytes)", name, len(b), tk.TransferAllowance())
	}
	if rep.Kind != "" {
		o.Status, o.Kind, o.Message = budget.Failed, string(rep.Kind), rep.Message
	}
	x.finish(ctx, tk, o)
	return rep
}

// decodeStrict decodes a built-in's arguments: a JSON object (empty or null means {}) without
// unknown fields.
func decodeStrict(args json.RawMessage, v any) error {
	trimmed := strings.TrimSpace(string(args))
	if trimmed == "" || trimmed == "null" {
		trimmed = "{}"
	}
	dec := json.NewDecoder(strings.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("arguments hold more than one JSON value")
	}
	return nil
}
