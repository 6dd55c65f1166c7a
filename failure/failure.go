package failure

import (
	"errors"
	"fmt"
)

// Kind names what went wrong with an execution, in the words of DESIGN.md §3.4.
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
	// ValueNotSerializable: the program's value could not be rendered as JSON.
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

// Refusal reports whether k is a refusal: a failure decided before any program byte ran.
func (k Kind) Refusal() bool {
	switch k {
	case IsolationUnavailable, NetworkUnavailable, BackendUnavailable:
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
