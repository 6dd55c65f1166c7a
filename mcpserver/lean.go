package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/mcp-sandbox/mcp-sandbox/approval"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/execution"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
)

// MetaReport is the _meta key under which every run_code result carries the whole report
// (execution.Result, as `mcp-sandbox run` prints it and the ledger keeps it) for hosts and
// operators, whatever the model-facing content holds.
const MetaReport = "mcp-sandbox/report"

// ModelResult is what a model reads of one execution: run_code's structuredContent, which
// hosts such as Claude Code hand their model as compact JSON, and the text rendering
// (RenderText) of the same (docs/design.md §14.1). It carries what a model needs to go on (the
// value, the output previews, the failure and its traceback, the limit that ended the
// program, the artifacts and the handles that exist) and, of the report, only what is not as
// asked: a guarantee below enforced, isolation other than the agent asked for, a budget nearly
// spent, approvals asked. Every key is left out when it has nothing to say, so a plain
// success is its value and its output; a key added later (the calls a failed program made, a
// rehearsal's plan) slots in beside the others.
type ModelResult struct {
	// Value is the program's value as JSON; absent when it is null, or too large to show whole
	// (ValuePreview then holds its head and tail, and Attachments its handle).
	Value        json.RawMessage `json:"value,omitempty"`
	ValuePreview string          `json:"value_preview,omitempty"`
	ValueRepr    *string         `json:"value_repr,omitempty"`
	ValueType    string          `json:"value_type,omitempty"`
	Stdout       string          `json:"stdout,omitempty"`
	Stderr       string          `json:"stderr,omitempty"`
	Failure      *engine.Failure `json:"failure,omitempty"`
	// LimitHit names the limit that ended the program, and Limit says what it was.
	LimitHit  *engine.LimitName `json:"limit_hit,omitempty"`
	Limit     string            `json:"limit,omitempty"`
	Cancelled bool              `json:"cancelled,omitempty"`
	// Attachments are the outputs cut to a preview here (a stream, the value): where the rest
	// is kept, or why it is not.
	Attachments      []outputs.Attachment        `json:"attachments,omitempty"`
	Artifacts        []outputs.Attachment        `json:"artifacts,omitempty"`
	ArtifactsOmitted []engine.OmittedFile        `json:"artifacts_omitted,omitempty"`
	Unavailable      []string                    `json:"unavailable_bindings,omitempty"`
	UpstreamProblems []execution.UpstreamProblem `json:"upstream_problems,omitempty"`
	// Network is what the egress proxy refused, when it refused anything.
	Network *NetworkRefusals   `json:"network,omitempty"`
	Resumed *execution.Resumed `json:"resumed,omitempty"`
	// A rehearsal's plan, whole: every call it listed with its arguments in full and the
	// stand-in the program got, the plan's id and what became of it (docs/design.md §22).
	// Program names the saved program and the version that ran.
	Program      *execution.Saved        `json:"program,omitempty"`
	Rehearsed    bool                    `json:"rehearsed,omitempty"`
	Plan         []budget.PlanEffect     `json:"plan,omitempty"`
	PlanID       string                  `json:"plan_id,omitempty"`
	PlanApproval *execution.PlanApproval `json:"plan_approval,omitempty"`

	// What is not as asked.

	// Isolation is the level reached, when it is not the one the agent asked for (asked): a
	// stronger one, since a program below its level is never run.
	Isolation engine.Level `json:"isolation,omitempty"`
	asked     engine.Level
	// IsolationFallback says why the profile runs below the isolated level it takes where it
	// can (a desktop without a container engine): the model is told every time.
	IsolationFallback string `json:"isolation_fallback,omitempty"`
	// Guarantees are the guarantees graded below enforced.
	Guarantees engine.Guarantees `json:"guarantees,omitempty"`
	// BudgetLeft is what is left of each of the Run's binding budgets that is at least
	// NearlySpent spent.
	BudgetLeft map[string]int64 `json:"budget_left,omitempty"`
	Approvals  *approval.Counts `json:"approvals,omitempty"`
}

// NetworkRefusals is what a model reads of the egress proxy's decisions: how many requests it
// allowed, and the first refusals ("host:port reason").
type NetworkRefusals struct {
	Allowed int      `json:"allowed"`
	Refused []string `json:"refused"`
	More    int      `json:"refused_more,omitempty"`
}

// NearlySpent is the share of a binding budget past which a result says what is left.
const NearlySpent = 0.8

// shownRefusals bounds the network refusals a model reads.
const shownRefusals = 5

// Lean is what a model reads of res, whose Run's binding budget is limits.
func Lean(res *execution.Result, limits budget.Limits) *ModelResult {
	m := &ModelResult{ValueType: res.ValueType, Stdout: res.Stdout, Stderr: res.Stderr, Failure: res.Failure,
		LimitHit: res.LimitHit, Cancelled: res.Cancelled, Artifacts: res.Artifacts, ArtifactsOmitted: res.ArtifactsOmit,
		Unavailable: res.Unavailable, UpstreamProblems: res.UpstreamProblems, Resumed: res.Resumed,
		Program: res.Program, Rehearsed: res.Rehearsed, Plan: res.Plan, PlanID: res.PlanID, PlanApproval: res.PlanApproval}
	if res.LimitHit != nil {
		m.Limit = limitText(res.Terms, *res.LimitHit)
	}
	ran := res.Failure == nil || res.Failure.Executed
	if ran {
		leanValue(m, res)
	}
	for _, a := range res.Attachments {
		if a.Truncated { // a stream cut to its preview, a value (or repr) larger than its own
			m.Attachments = append(m.Attachments, a)
		}
	}
	if n := res.Network; n != nil && len(n.Refused) > 0 {
		nr := &NetworkRefusals{Allowed: n.Allowed}
		for i, r := range n.Refused {
			if i == shownRefusals {
				nr.More = len(n.Refused) - shownRefusals
				break
			}
			nr.Refused = append(nr.Refused, fmt.Sprintf("%s:%d %s", r.Host, r.Port, r.Reason))
		}
		m.Network = nr
	}
	if ran {
		if res.Isolation != "" && res.Isolation != res.Terms.Isolation {
			m.Isolation, m.asked = res.Isolation, res.Terms.Isolation
		}
		m.IsolationFallback = res.IsolationFallback
		for _, d := range engine.Dimensions {
			if g := res.Guarantees.Get(d); g != engine.Enforced {
				if m.Guarantees == nil {
					m.Guarantees = engine.Guarantees{}
				}
				m.Guarantees[d] = g
			}
		}
	}
	m.BudgetLeft = budgetLeft(res.Budget.Run, limits)
	if a := res.Approvals; a.Asked+a.Unasked > 0 {
		m.Approvals = &a
	}
	return m
}

// leanValue sets m's value: the JSON when it fits its preview, else its head and tail (the
// whole is under the handle of attachment "value"); a value_repr likewise, cut to its preview.
func leanValue(m *ModelResult, res *execution.Result) {
	switch v := res.Value; {
	case len(v) == 0 || string(v) == "null":
	case len(v) > execution.ValuePreviewBytes:
		m.ValuePreview = outputs.Preview(v, v, int64(len(v)), execution.ValuePreviewBytes)
	default:
		m.Value = v
	}
	if r := res.ValueRepr; r != nil {
		s := *r
		if len(s) > execution.ValuePreviewBytes {
			s = outputs.Preview([]byte(s), []byte(s), int64(len(s)), execution.ValuePreviewBytes)
		}
		m.ValueRepr = &s
	}
}

// budgetLeft is what is left of each of run's budgets under limits that is at least
// NearlySpent spent; nil when none is.
func budgetLeft(run budget.Usage, limits budget.Limits) map[string]int64 {
	var left map[string]int64
	for _, b := range []struct {
		name        string
		used, limit int64
	}{
		{"calls", run.Calls, int64(limits.MaxCalls)},
		{"transfer_bytes", run.TransferBytes, limits.MaxTotalBytes},
		{"produced_bytes", run.ProducedBytes, limits.MaxProducedBytes},
		{"preserved_bytes", run.PreservedBytes, limits.MaxPreservedBytes},
	} {
		if b.limit > 0 && float64(b.used) >= NearlySpent*float64(b.limit) {
			if left == nil {
				left = map[string]int64{}
			}
			left[b.name] = max(b.limit-b.used, 0)
		}
	}
	return left
}

// limitText says the limit a result hit, as the terms set it.
func limitText(t engine.Terms, l engine.LimitName) string {
	switch l {
	case engine.LimitWall:
		return fmt.Sprintf("%gs of wall clock", t.WallSeconds)
	case engine.LimitCPU:
		return fmt.Sprintf("%gs of CPU", t.CPUSeconds)
	case engine.LimitMemory:
		return bytesText(t.MemoryBytes) + " of memory"
	case engine.LimitFileSize:
		return bytesText(t.FileSizeBytes) + " a file"
	case engine.LimitProcessCount:
		return fmt.Sprintf("%d processes", t.ProcessCount)
	}
	return ""
}

// ModelReads is what a host hands its model of a run_code result, whose Run's binding budget
// is limits: for a failed one (isError) the text, which is what hosts show then; otherwise
// the structured content (run_code declares an outputSchema) as compact JSON, as a host that
// parsed it writes it back (Claude Code: JSON.stringify). Its length is the result's
// context.returned_bytes.
func ModelReads(res *execution.Result, limits budget.Limits) string {
	m := Lean(res, limits)
	if res.Failure != nil {
		return RenderText(m)
	}
	return hostJSON(m)
}

// hostJSON is v as compact JSON the way a JavaScript host re-encodes what it parsed
// (JSON.stringify of JSON.parse): <, > and & as they are, U+2028 and U+2029 unescaped, and
// numbers as JavaScript writes them (1.0 is 1, 1e+20 is 100000000000000000000).
func hostJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return ""
	}
	return jsRewrite(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}
