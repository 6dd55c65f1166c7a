package engine

import (
	"encoding/json"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// Result is the outcome of one execution, failures included, in the shape of docs/design.md §3.4.
type Result struct {
	Value json.RawMessage `json:"value"`
	// ValueRepr is the repr of a final value that JSON cannot carry (a set, a datetime, a
	// DataFrame): Value is then null and the program counts as completed. Absent otherwise.
	ValueRepr       *string       `json:"value_repr,omitempty"`
	Stdout          string        `json:"stdout"`
	Stderr          string        `json:"stderr"`
	StdoutSize      int64         `json:"stdout_size"`
	StderrSize      int64         `json:"stderr_size"`
	Failure         *Failure      `json:"failure"`
	LimitHit        *LimitName    `json:"limit_hit"`
	Cancelled       bool          `json:"cancelled"`
	DurationSeconds float64       `json:"duration_seconds"`
	Terms           Terms         `json:"terms"`
	Isolation       Level         `json:"isolation"`
	Guarantees      Guarantees    `json:"guarantees"`
	NetworkDenied   bool          `json:"network_denied"`
	Attachments     []Attachment  `json:"attachments"`
	Artifacts       []Attachment  `json:"artifacts"`
	ArtifactsOmit   []OmittedFile `json:"artifacts_omitted"`
	Unavailable     []string      `json:"unavailable_bindings"`
	// UpstreamProblems are the granted upstream servers with something wrong with their tools
	// at this execution (one that could not be started, and why: its tools are missing from
	// TOOLS and have no alias), as list_tools reports them.
	UpstreamProblems []UpstreamProblem `json:"upstream_problems,omitempty"`
	Budget           BudgetReport      `json:"budget"`
	Approvals        ApprovalCounts    `json:"approvals"`
	Context          ContextReport     `json:"context"`

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

// Values of Result.Start.
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

// Attachment is one stream or artifact of an execution.
type Attachment struct {
	Name        string `json:"name"`
	Handle      string `json:"handle,omitempty"`
	ContentType string `json:"content_type"`
	Size        int64  `json:"size"`
	Truncated   bool   `json:"truncated"`
	// Location is inline (whole in the result), blob (kept under Handle) or preview_only.
	Location string `json:"location"`
	// Reason says why an attachment that was meant to be kept is preview_only (no blob store,
	// the tenant's stored-bytes quota, the store failing); empty otherwise.
	Reason string `json:"reason,omitempty"`
	// Text is an artifact's whole content when it is text of at most the output preview size,
	// so a model reads a small file without another call (Location is then inline; a Handle
	// may still name the kept copy). Absent otherwise.
	Text *string `json:"text,omitempty"`
}

// UpstreamProblem is what is wrong with a granted upstream server's tools, in words safe to
// show the model.
type UpstreamProblem struct {
	Server  string `json:"server"`
	Problem string `json:"problem"`
}

// OmittedFile is a workspace entry that was not collected, with the reason.
type OmittedFile struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// BudgetReport is what the binding meters counted, per execution and per Run.
type BudgetReport struct {
	Execution Usage `json:"execution"`
	Run       Usage `json:"run"`
}

// ApprovalCounts are the decisions on an execution's calls that needed a person's approval
// (package binding's approval step). Asked counts the questions put; each ends accepted,
// declined (declined or dismissed), timed out, or, when the host failed to answer, in none of
// these. Unasked counts calls refused because the host cannot ask anyone.
type ApprovalCounts struct {
	Asked    int64 `json:"asked"`
	Accepted int64 `json:"accepted"`
	Declined int64 `json:"declined"`
	TimedOut int64 `json:"timed_out"`
	Unasked  int64 `json:"unasked"`
}

// Usage is one half of a BudgetReport.
type Usage struct {
	Calls          int64 `json:"calls"`
	TransferBytes  int64 `json:"transfer_bytes"`
	ProducedBytes  int64 `json:"produced_bytes"`
	PreservedBytes int64 `json:"preserved_bytes"`
}

// ContextReport is the context economy of run_code, per execution and per Run: what the
// program received from its tool calls beside what came back to the model.
type ContextReport struct {
	Execution ContextUsage `json:"execution"`
	Run       ContextUsage `json:"run"`
}

// ContextUsage is one half of a ContextReport. BindingBytes are the bytes of the values the
// program received from its tool calls and handle reads (built-ins included); ReturnedBytes
// the bytes of the result's text rendering, which is what the model reads; KeptOutBytes is
// BindingBytes less ReturnedBytes, never below zero (per Run: the sum over its executions).
type ContextUsage struct {
	BindingBytes  int64 `json:"binding_bytes"`
	ReturnedBytes int64 `json:"returned_bytes"`
	KeptOutBytes  int64 `json:"kept_out_bytes"`
}

// NewContextUsage is the usage of one execution that received binding bytes and returned
// returned bytes to the model.
func NewContextUsage(binding, returned int64) ContextUsage {
	return ContextUsage{BindingBytes: binding, ReturnedBytes: returned, KeptOutBytes: max(binding-returned, 0)}
}

// OK reports whether the execution completed without a failure.
func (r *Result) OK() bool { return r.Failure == nil }

// Refuse returns the result of an execution that was refused before anything ran.
func Refuse(t Terms, k failure.Kind, message string) *Result {
	r := emptyResult(t)
	r.Failure = &Failure{Kind: k, Message: message}
	return r
}

func emptyResult(t Terms) *Result {
	return &Result{
		Value:         json.RawMessage("null"),
		Terms:         t,
		Isolation:     LevelProcess,
		Guarantees:    Guarantees{},
		Attachments:   []Attachment{},
		Artifacts:     []Attachment{},
		ArtifactsOmit: []OmittedFile{},
		Unavailable:   []string{},
	}
}

func limitPtr(n LimitName) *LimitName { return &n }
