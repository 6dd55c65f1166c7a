package engine

import (
	"context"
	"errors"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// The refusals more than one sandbox says, each written once: the Runner, the remote client,
// the sandbox service and assembly (which says a refusal up front, in run_code's description) use
// these rather than a text of their own.

// NetworkRefusal is why a program whose terms ask for network cannot run under a sandbox
// profile that allows none (allowNetwork false) or has no network rules (rules false), or ""
// when that is not why.
func NetworkRefusal(network Network, allowNetwork, rules bool) string {
	switch {
	case network == NetworkUnrestricted && !allowNetwork:
		return "network access was requested (network: unrestricted), but this sandbox profile does not allow network (allow_network: false); nothing ran"
	case network == NetworkRules && !rules:
		return "network by rules was requested (network: rules), but this sandbox profile has no network rules (network: {allow: [...]}); nothing ran"
	}
	return ""
}

// RefusalOf is how a sandbox that could not be opened, or could not start a child, refuses a
// run: err's kind (backend_unavailable when it names none: an internal error of opening is
// the backend's unavailability to the model) and its model-safe message.
func RefusalOf(err error) (failure.Kind, string) {
	kind := failure.KindOf(err)
	if kind == failure.Internal {
		kind = failure.BackendUnavailable
	}
	var fe *failure.Error
	if errors.As(err, &fe) && fe.Message != "" {
		return kind, fe.Message
	}
	return kind, err.Error()
}

// Unopened stands in for a sandbox profile whose backend could not be opened: every run is
// refused as RefusalOf(err) says, so a server and an agent's other tools keep working.
type Unopened struct {
	kind   failure.Kind
	reason string
}

// NewUnopened is the stand-in of a sandbox whose opening failed with err.
func NewUnopened(err error) *Unopened {
	kind, reason := RefusalOf(err)
	return &Unopened{kind: kind, reason: reason}
}

// Run refuses: nothing runs.
func (u *Unopened) Run(_ context.Context, ex Execution) *Outcome {
	return Refuse(ex.Terms, u.kind, u.reason+"; nothing ran")
}

// Unavailable is why nothing runs, for a description to say (run_code's).
func (u *Unopened) Unavailable() string { return u.reason }

// Kind is the kind every run is refused with.
func (u *Unopened) Kind() failure.Kind { return u.kind }

func (u *Unopened) Describe(context.Context) *Description {
	return &Description{Guarantees: Guarantees{}, Mechanisms: []string{}, Problems: []string{u.reason}}
}
