package telemetry

// Metrics receives what the server counts. Package metrics implements it over Prometheus;
// implementations are safe for concurrent use and never block for long.
type Metrics interface {
	// Execution is one run_code that ended, refusals included.
	Execution(s Scope, e Execution)
	// Call is one tool call that ended: a program's binding call, or a host's direct call.
	Call(s Scope, c Call)
	// BudgetRefusal is a call the binding budget refused before it was made: meter is the
	// limit reached (max_calls, max_total_bytes, …, max_argument_bytes) and half is
	// "execution" or "run".
	BudgetRefusal(s Scope, meter, half string)
	// Approval is one decision on a call that needs a person's approval: accepted, declined,
	// cancelled, timed_out, failed (the host could not put the question) or unasked (this
	// host cannot ask a person), as the run ledger records it.
	Approval(s Scope, decision string)
	// Kept is one output kept in the blob store under a handle: source is "output" (a
	// stream, a value or an artifact of an execution), "binding" (a binding result over
	// the transfer allowance) or "direct" (a host's direct call's result over the preview
	// size), bytes what the store holds.
	Kept(s Scope, source string, bytes int64)
}

// Scope is who an event belongs to.
type Scope struct{ Tenant, Agent string }

// Execution is one run_code's outcome.
type Execution struct {
	Profile string
	// Level is the isolation level the execution reached, or "none" when nothing ran.
	Level string
	// Outcome is "completed", "failed" (the program ran and failed) or "refused" (nothing
	// of it ran); Kind is the failure kind, "" when completed.
	Outcome, Kind string
	// Start is "warm" (a child started ahead of time), "cold" (started for this execution),
	// "none" (refused before a child was started) or "unknown" (the backend does not say: a
	// remote one).
	Start   string
	Seconds float64
	// Context is the execution's context economy (zeros for a refusal).
	Context Context
	// EgressAllowed counts the requests the execution's egress proxy forwarded, and
	// EgressRefused its refusals by reason (network rules only; docs/design.md §18).
	EgressAllowed int
	EgressRefused map[string]int
}

// Context is the context economy of a run_code or of a host's direct call: BindingBytes are
// the bytes tools gave (the values a program received; a direct call's result), ReturnedBytes
// the bytes of the text the model reads, KeptOutBytes the difference, never below zero. It is
// the one type of it: the run ledger keeps it per execution and sums it per Run
// (budget.Ledger.RunContext), a run_code result reports it (execution.Context), and metrics
// count it.
type Context struct {
	BindingBytes  int64 `json:"binding_bytes"`
	ReturnedBytes int64 `json:"returned_bytes"`
	KeptOutBytes  int64 `json:"kept_out_bytes"`
}

// Call is one tool call's outcome.
type Call struct {
	// Upstream is the configured server the call named, UpstreamBuiltin for a built-in
	// (list_tools, get_tool_info, read_tool_output, run_code refused) or UpstreamUnknown for
	// a name that is no granted server's.
	Upstream string
	// Outcome is "ok" or the failure kind the caller got.
	Outcome string
	// Direct is a host's call of an exposed tool rather than a program's binding call.
	Direct  bool
	Seconds float64
	// Context is a direct call's context economy (zeros for a program's call, whose bytes
	// count in its execution's, and for a failed call).
	Context Context
}

// Upstream label values that are no configured server's name (those never start with "_").
const (
	UpstreamBuiltin = "_builtin"
	UpstreamUnknown = "_unknown"
)

// Reporter is Metrics bound to one agent. The zero Reporter reports nothing, so a package
// that takes one in its options needs no nil checks.
type Reporter struct {
	m Metrics
	s Scope
}

// For binds m to tenant and agent; a nil m gives the zero Reporter.
func For(m Metrics, tenant, agent string) Reporter {
	return Reporter{m: m, s: Scope{Tenant: tenant, Agent: agent}}
}

// Execution reports one run_code's outcome.
func (r Reporter) Execution(e Execution) {
	if r.m != nil {
		r.m.Execution(r.s, e)
	}
}

// Call reports one tool call's outcome.
func (r Reporter) Call(c Call) {
	if r.m != nil {
		r.m.Call(r.s, c)
	}
}

// BudgetRefusal reports a call the binding budget refused.
func (r Reporter) BudgetRefusal(meter, half string) {
	if r.m != nil {
		r.m.BudgetRefusal(r.s, meter, half)
	}
}

// Approval reports one approval decision.
func (r Reporter) Approval(decision string) {
	if r.m != nil {
		r.m.Approval(r.s, decision)
	}
}

// Kept reports one output kept under a handle.
func (r Reporter) Kept(source string, bytes int64) {
	if r.m != nil {
		r.m.Kept(r.s, source, bytes)
	}
}
