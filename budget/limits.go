package budget

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Limits are the ceilings of a binding budget (config key binding_budget). A zero field means
// this layer sets no ceiling; a negative one is invalid.
type Limits struct {
	MaxCalls          int   `json:"max_calls,omitempty"`
	MaxTotalBytes     int64 `json:"max_total_bytes,omitempty"`     // transfer into the sandbox
	MaxProducedBytes  int64 `json:"max_produced_bytes,omitempty"`  // made by upstream tools
	MaxPreservedBytes int64 `json:"max_preserved_bytes,omitempty"` // held in ledger or blob store
	MaxArgumentBytes  int64 `json:"max_argument_bytes,omitempty"`  // per call
	MaxResultBytes    int64 `json:"max_result_bytes,omitempty"`    // per call, inline transfer
}

// Validate reports a negative ceiling.
func (l Limits) Validate() error {
	var errs []error
	check := func(name string, v int64) {
		if v < 0 {
			errs = append(errs, fmt.Errorf("binding_budget.%s: %d is negative", name, v))
		}
	}
	check("max_calls", int64(l.MaxCalls))
	check("max_total_bytes", l.MaxTotalBytes)
	check("max_produced_bytes", l.MaxProducedBytes)
	check("max_preserved_bytes", l.MaxPreservedBytes)
	check("max_argument_bytes", l.MaxArgumentBytes)
	check("max_result_bytes", l.MaxResultBytes)
	return errors.Join(errs...)
}

// Narrow returns the tighter of l and other, field by field. It never raises a ceiling: an
// unset (zero) field takes the other's value.
func (l Limits) Narrow(other Limits) Limits {
	return Limits{
		MaxCalls:          int(narrow(int64(l.MaxCalls), int64(other.MaxCalls))),
		MaxTotalBytes:     narrow(l.MaxTotalBytes, other.MaxTotalBytes),
		MaxProducedBytes:  narrow(l.MaxProducedBytes, other.MaxProducedBytes),
		MaxPreservedBytes: narrow(l.MaxPreservedBytes, other.MaxPreservedBytes),
		MaxArgumentBytes:  narrow(l.MaxArgumentBytes, other.MaxArgumentBytes),
		MaxResultBytes:    narrow(l.MaxResultBytes, other.MaxResultBytes),
	}
}

func narrow(a, b int64) int64 {
	switch {
	case a <= 0:
		return max(b, 0)
	case b <= 0:
		return a
	}
	return min(a, b)
}

// ceiling turns an unset limit into "no ceiling".
func ceiling(v int64) int64 {
	if v <= 0 {
		return math.MaxInt64
	}
	return v
}

// Usage is what the meters have counted; it is the "budget" object of a result (docs/design.md §3.4).
type Usage struct {
	Calls          int64 `json:"calls"`
	TransferBytes  int64 `json:"transfer_bytes"`
	ProducedBytes  int64 `json:"produced_bytes"`
	PreservedBytes int64 `json:"preserved_bytes"`
}

// Add returns u plus v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		Calls:          u.Calls + v.Calls,
		TransferBytes:  u.TransferBytes + v.TransferBytes,
		ProducedBytes:  u.ProducedBytes + v.ProducedBytes,
		PreservedBytes: u.PreservedBytes + v.PreservedBytes,
	}
}

// bytes is u without its calls: what a finished call's record charges.
func (u Usage) bytes() Usage { u.Calls = 0; return u }

// Sub returns u less v.
func (u Usage) Sub(v Usage) Usage {
	return u.Add(Usage{Calls: -v.Calls, TransferBytes: -v.TransferBytes, ProducedBytes: -v.ProducedBytes, PreservedBytes: -v.PreservedBytes})
}

// Exhausted names the first meter of u that has reached its ceiling in l, counting extraCalls
// calls not yet in u, or returns "" when a further call may be admitted.
func (u Usage) Exhausted(l Limits, extraCalls int64) string {
	switch {
	case u.Calls+extraCalls >= ceiling(int64(l.MaxCalls)):
		return fmt.Sprintf("max_calls (%d)", l.MaxCalls)
	case u.TransferBytes >= ceiling(l.MaxTotalBytes):
		return fmt.Sprintf("max_total_bytes (%d)", l.MaxTotalBytes)
	case u.ProducedBytes >= ceiling(l.MaxProducedBytes):
		return fmt.Sprintf("max_produced_bytes (%d)", l.MaxProducedBytes)
	case u.PreservedBytes >= ceiling(l.MaxPreservedBytes):
		return fmt.Sprintf("max_preserved_bytes (%d)", l.MaxPreservedBytes)
	}
	return ""
}

// refusalMeters are the limits a refusal of Meter.Admit can name, in its message.
var refusalMeters = []string{"max_calls", "max_total_bytes", "max_produced_bytes", "max_preserved_bytes", "max_argument_bytes"}

// RefusedMeter names the limit a refusal of Meter.Admit (budget_exceeded or
// argument_too_large) reached, read from its message: meter is max_calls, max_total_bytes,
// max_produced_bytes, max_preserved_bytes or max_argument_bytes, and half whose it is: "run",
// "execution", or "call" for the per-call ceiling on arguments. Both are "" when msg names
// no limit (an execution that has ended, say).
func RefusedMeter(msg string) (meter, half string) {
	for _, m := range refusalMeters {
		if strings.Contains(msg, m+" (") {
			meter = m
			break
		}
	}
	switch {
	case meter == "":
		return "", ""
	case meter == "max_argument_bytes":
		return meter, "call"
	case strings.HasPrefix(msg, "the run's"):
		return meter, "run"
	}
	return meter, "execution"
}
