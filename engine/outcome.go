package engine

import (
	"encoding/json"

	"github.com/mcp-sandbox/mcp-sandbox/egress"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
)

// Outcome is what the sandbox saw of one execution, failures included: the part of the result
// document (docs/design.md §3.4) a backend fills. What the host adds (budget, approvals, context,
// bindings and upstream problems) is package execution's Result, which embeds it.
type Outcome struct {
	Value json.RawMessage `json:"value"`
	// ValueRepr is the repr of a final value that JSON cannot carry (a set, a datetime, a
	// DataFrame): Value is then null and the program counts as completed. Absent otherwise.
	ValueRepr *string `json:"value_repr,omitempty"`
	// ValueType names the Python type a value JSON cannot carry as it is was converted from
	// (a numpy array, a DataFrame, a pydantic model, a datetime: engine/bootstrap's doc lists
	// them), e.g. "numpy.ndarray". Absent for a value that needed no converting.
	ValueType       string     `json:"value_type,omitempty"`
	Stdout          string     `json:"stdout"`
	Stderr          string     `json:"stderr"`
	StdoutSize      int64      `json:"stdout_size"`
	StderrSize      int64      `json:"stderr_size"`
	Failure         *Failure   `json:"failure"`
	LimitHit        *LimitName `json:"limit_hit"`
	Cancelled       bool       `json:"cancelled"`
	DurationSeconds float64    `json:"duration_seconds"`
	Terms           Terms      `json:"terms"`
	Isolation       Level      `json:"isolation"`
	// IsolationFallback says why the profile runs below the isolated level it takes where it
	// can (RunnerOptions.Fallback): absent when it does not.
	IsolationFallback string     `json:"isolation_fallback,omitempty"`
	Guarantees        Guarantees `json:"guarantees"`
	NetworkDenied     bool       `json:"network_denied"`
	// Network is what the egress proxy decided, under network rules only.
	Network       *egress.Stats        `json:"network,omitempty"`
	Attachments   []outputs.Attachment `json:"attachments"`
	Artifacts     []outputs.Attachment `json:"artifacts"`
	ArtifactsOmit []OmittedFile        `json:"artifacts_omitted"`
	// Started is the start block: exec'd or forked, for an execution that had a child; absent
	// for a refusal before one, or a backend that does not say (remote).
	Started *StartInfo `json:"start,omitempty"`

	// StdoutData and StderrData are the captured bytes (at most the output ceiling each); they
	// stay on the host and never enter the JSON.
	StdoutData []byte `json:"-"`
	StderrData []byte `json:"-"`
	// ArtifactFiles hold the collected artifacts' bytes, in the order of Artifacts.
	ArtifactFiles []ArtifactFile `json:"-"`
	// Start says how the execution's child was had, for the operator's metrics: StartWarm,
	// StartCold, or "" when none was started (a refusal before a child, or a remote backend).
	Start string `json:"-"`
}

// Values of Outcome.Start.
const (
	StartWarm = "warm" // a child started ahead of time, for the same terms
	StartCold = "cold" // a child started for this execution
)

// Failure says why an execution did not complete. Executed is false for a refusal: nothing of
// the program ran.
type Failure struct {
	Kind      failure.Kind `json:"kind"`
	Message   string       `json:"message"`
	Traceback string       `json:"traceback,omitempty"`
	Executed  bool         `json:"executed"`
}

// OmittedFile is a workspace entry that was not collected, with the reason.
type OmittedFile struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// OK reports whether the execution completed without a failure.
func (r *Outcome) OK() bool { return r.Failure == nil }

// Refuse returns the result of an execution that was refused before anything ran.
func Refuse(t Terms, k failure.Kind, message string) *Outcome {
	r := emptyOutcome(t)
	r.Failure = &Failure{Kind: k, Message: message}
	return r
}

func emptyOutcome(t Terms) *Outcome {
	return &Outcome{
		Value:         json.RawMessage("null"),
		Terms:         t,
		Isolation:     LevelProcess,
		Guarantees:    Guarantees{},
		Attachments:   []outputs.Attachment{},
		Artifacts:     []outputs.Attachment{},
		ArtifactsOmit: []OmittedFile{},
	}
}

func limitPtr(n LimitName) *LimitName { return &n }
