package failure

import (
	"errors"
	"fmt"
)

// Kind names what went wrong: with an execution (docs/design.md §3.6, ResultKinds) or with one
// binding call (§3.6, CallKinds). One type for both, because a call's timeout and cancelled are
// the same words as an execution's and a *Error carries either across package boundaries.
type Kind string

// The kinds of failure an execution result can carry.
const (
	// ProgramError: the program raised an uncaught exception or did not compile.
	ProgramError Kind = "program_error"
	// LimitExceeded: a hard limit ended the execution; the result's limit_hit names it.
	LimitExceeded Kind = "limit_exceeded"
	// Timeout: the wall clock ended the execution.
	Timeout Kind = "timeout"
	// Cancelled: the caller withdrew the request and the program's tree was killed.
	Cancelled Kind = "cancelled"
	// ValueNotSerializable: the program's value could not be returned at all: not as JSON,
	// and not as its repr (value_repr) either, or it is over the value's size ceiling.
	ValueNotSerializable Kind = "value_not_serializable"
	// IsolationUnavailable: the backend could not reach the isolation the terms require;
	// nothing executed.
	IsolationUnavailable Kind = "isolation_unavailable"
	// NetworkUnavailable: network was asked for and neither the profile nor the policy grants
	// it; nothing executed.
	NetworkUnavailable Kind = "network_unavailable"
	// BackendUnavailable: the backend is not ready (missing binary, image, service); nothing
	// executed.
	BackendUnavailable Kind = "backend_unavailable"
	// CapacityExceeded: the tenant's, or the server's, limit of executions running at once
	// was reached and no slot freed within the tenant's queue wait; nothing executed.
	CapacityExceeded Kind = "capacity_exceeded"
	// ProviderError: a remote sandbox service failed to deliver the execution.
	ProviderError Kind = "provider_error"
	// ProtocolViolation: the child broke the host⇄child protocol.
	ProtocolViolation Kind = "protocol_violation"
	// OutputNotPreserved: preservation was required and the output could not be kept.
	OutputNotPreserved Kind = "output_not_preserved"
	// Internal: the host itself failed; the operator's log has the detail.
	Internal Kind = "internal"
	// ConfigInvalid: a configuration was rejected. It is not an execution result kind; it is
	// what `check` and startup report.
	ConfigInvalid Kind = "config_invalid"
)

// The kinds a binding call can fail with, as a program's ToolError.kind sees it (docs/design.md
// §3.6). Timeout and Cancelled above are kinds of a call too. Whoever refuses or fails a call
// (upstream's policy and client, budget's meters, binding's paging and reads) uses these
// constants; none is translated on the way to the program.
const (
	// Unavailable: no such tool is offered to this program (unknown, not granted, not among
	// the agent's bindings, its server could not be listed), or no such handle is known.
	Unavailable Kind = "unavailable"
	// Denied: the tenant's policy denies the tool (or, by an argument rule, this call of it),
	// or the person asked to approve the call declined it.
	Denied Kind = "denied"
	// ApprovalRequiredInProgram: the call needs a person's approval and has none: this host
	// cannot ask anyone, or nobody answered in time. The name is kept (kinds are permanent);
	// a direct call is refused with it too.
	ApprovalRequiredInProgram Kind = "approval_required_in_program"
	// ExcludedBuiltin: a built-in of the MCP face that a program may not call (run_code).
	ExcludedBuiltin Kind = "excluded_builtin"
	// InvalidArguments: the arguments are not a JSON object matching the tool's input schema.
	InvalidArguments Kind = "invalid_arguments"
	// ArgumentTooLarge: the call's arguments are over max_argument_bytes.
	ArgumentTooLarge Kind = "argument_too_large"
	// BudgetExceeded: a meter of the execution or of the Run has reached its ceiling.
	BudgetExceeded Kind = "budget_exceeded"
	// BindingResultTooLarge: a handle window is wider than may cross in one piece.
	BindingResultTooLarge Kind = "binding_result_too_large"
	// BindingResultNotPaged: a result over the per-call ceiling could not be kept under a
	// handle (no blob store, the store failed, or no preserved budget left).
	BindingResultNotPaged Kind = "binding_result_not_paged"
	// ToolError: the upstream answered isError; the message is its text.
	ToolError Kind = "tool_error"
	// UpstreamError: the upstream could not be reached, or failed to answer.
	UpstreamError Kind = "upstream_error"
	// InvalidResult: the upstream answered with a value the program cannot be handed (nested
	// deeper than a program's JSON decoder goes); the call was made and spent.
	InvalidResult Kind = "invalid_result"
	// ReplayDiverged: under `mcp-sandbox replay`, the call is not the one the cassette recorded
	// at its sequence number (another tool or other arguments), or is past its end.
	ReplayDiverged Kind = "replay_diverged"
)

// ResultKinds lists, in the order of docs/design.md §3.6, the kinds an execution's result can carry
// (and ConfigInvalid, which check and startup report). Kinds are permanent API: the golden list
// in failure_test.go fails when one is renamed or removed.
func ResultKinds() []Kind {
	return []Kind{ProgramError, LimitExceeded, Timeout, Cancelled, ValueNotSerializable,
		IsolationUnavailable, NetworkUnavailable, BackendUnavailable, CapacityExceeded, ProviderError,
		ProtocolViolation, OutputNotPreserved, Internal, ConfigInvalid}
}

// CallKinds lists, in the order of docs/design.md §3.6, the kinds a binding call can fail with: the
// only values a program's ToolError.kind takes.
func CallKinds() []Kind {
	return []Kind{Unavailable, Denied, ApprovalRequiredInProgram, ExcludedBuiltin,
		InvalidArguments, ArgumentTooLarge, BudgetExceeded, BindingResultTooLarge,
		BindingResultNotPaged, ToolError, UpstreamError, Timeout, Cancelled, InvalidResult, ReplayDiverged}
}

// CallKind reports whether k is one of CallKinds.
func (k Kind) CallKind() bool {
	switch k {
	case Unavailable, Denied, ApprovalRequiredInProgram, ExcludedBuiltin, InvalidArguments,
		ArgumentTooLarge, BudgetExceeded, BindingResultTooLarge, BindingResultNotPaged,
		ToolError, UpstreamError, Timeout, Cancelled, InvalidResult, ReplayDiverged:
		return true
	}
	return false
}

// Refusal reports whether k is a refusal: a failure decided before any program byte ran.
func (k Kind) Refusal() bool {
	switch k {
	case IsolationUnavailable, NetworkUnavailable, BackendUnavailable, CapacityExceeded:
		return true
	}
	return false
}

// Error is a failure with a kind, a message safe to show a model, and an optional cause kept
// for the operator.
type Error struct {
	Kind    Kind
	Message string
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Kind, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Kind, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// New returns an Error of kind k with a message formatted from format and args.
func New(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an Error of kind k whose cause is err.
func Wrap(k Kind, err error, format string, args ...any) *Error {
	return &Error{Kind: k, Message: fmt.Sprintf(format, args...), Err: err}
}

// KindOf returns the kind of the first *Error in err's chain, or Internal when there is none.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Internal
}
