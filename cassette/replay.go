package cassette

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
)

// The verdicts of a replay (`mcp-sandbox replay`).
const (
	Same           = "same"            // the recorded calls exactly, and the recorded value
	Diverged       = "diverged"        // a call that was not the recording's (Divergence)
	DifferentValue = "different_value" // the recorded calls, but another value or a failure
	Unreadable     = "unreadable"      // no cassette could be read
)

// Verdict is what a replay says of one cassette (replay --json prints it whole).
type Verdict struct {
	Cassette      string          `json:"cassette"`
	Verdict       string          `json:"verdict"` // Same, Diverged, DifferentValue or Unreadable
	Divergence    *Divergence     `json:"divergence,omitempty"`
	Recorded      json.RawMessage `json:"recorded_value,omitempty"`
	Actual        json.RawMessage `json:"actual_value,omitempty"`
	Failure       any             `json:"failure,omitempty"`
	CallsRecorded int             `json:"calls_recorded"`
	Error         string          `json:"error,omitempty"`
}

// UnreadableVerdict is the verdict of name, whose cassette could not be read (err).
func UnreadableVerdict(name string, err error) *Verdict {
	return &Verdict{Cassette: name, Verdict: Unreadable, Error: err.Error()}
}

// Judge is the verdict of the cassette c, read from name and played by p, of a program that
// ended with value, or with failed (nil when it completed).
func Judge(name string, c *Cassette, p *Player, value json.RawMessage, failed any) *Verdict {
	v := &Verdict{Cassette: name, CallsRecorded: len(c.Calls), Recorded: c.Value(), Actual: value, Failure: failed}
	switch v.Divergence = p.Divergence(); {
	case v.Divergence != nil:
		v.Verdict = Diverged
	case failed != nil || !SameJSON(v.Recorded, v.Actual):
		v.Verdict = DifferentValue
	default:
		v.Verdict = Same
	}
	return v
}

// Line is the verdict as replay prints it without --json.
func (v *Verdict) Line() string {
	switch v.Verdict {
	case Same:
		return v.Cassette + ": same"
	case Diverged:
		rec, act := v.Divergence.Calls()
		return fmt.Sprintf("%s: diverged at %d\n  recorded: %s\n  actual:   %s", v.Cassette, v.Divergence.Seq, rec, act)
	case DifferentValue:
		s := fmt.Sprintf("%s: different value\n  recorded: %s\n  actual:   %s", v.Cassette, v.Recorded, v.Actual)
		if v.Failure != nil {
			b, _ := json.Marshal(v.Failure)
			s += "\n  failure:  " + string(b)
		}
		return s
	}
	return v.Cassette + ": unreadable: " + v.Error
}

// Calls are the recorded and the actual call of d, each "tool {arguments}" or why there is
// none: the one text of a divergence, for a replay's verdict and a resumed program's failure
// alike.
func (d *Divergence) Calls() (recorded, actual string) {
	recorded, actual = "no call (past the end of the recording)", "no call (the program ended first)"
	if d.Recorded != nil {
		recorded = d.Recorded.Tool + " " + string(d.Recorded.Arguments)
	}
	if d.Actual != nil {
		actual = d.Actual.Tool + " " + string(d.Actual.Arguments)
	}
	return recorded, actual
}

// SameJSON reports whether a and b are the same JSON value (as a replay compares values).
func SameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(bytes.TrimSpace(a), bytes.TrimSpace(b))
	}
	return reflect.DeepEqual(x, y)
}
