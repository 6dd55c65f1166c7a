package execution

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/mcp-sandbox/mcp-sandbox/approval"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
)

// Result is the result document of one execution (docs/design.md §3.4), failures included: what
// the sandbox saw (engine.Outcome, whose keys come first) and what the host adds, each in the
// type of the package that computes it. testdata/keys.txt pins its keys.
type Result struct {
	engine.Outcome
	// Unavailable are the agent's bindings that name no tool the turn can call.
	Unavailable []string `json:"unavailable_bindings"`
	// UpstreamProblems are the granted upstream servers with something wrong with their tools
	// at this execution (one that could not be started, and why: its tools are missing from
	// TOOLS and have no alias), as list_tools reports them.
	UpstreamProblems []UpstreamProblem `json:"upstream_problems,omitempty"`
	Budget           Budget            `json:"budget"`
	Approvals        approval.Counts   `json:"approvals"`
	Context          Context           `json:"context"`
	// Resumed is set when the program was run again from its journal after it paused on an
	// approval and the process holding it was gone (docs/design.md §11).
	Resumed *Resumed `json:"resumed,omitempty"`
	// Rehearsed is set for a rehearsal (docs/design.md §22): Plan are the calls it listed
	// instead of making them, in order, with the stand-in each returned; PlanID names the
	// plan they are kept as, and PlanApproval says what became of it.
	// Program names the saved program and the version that ran (docs/design.md §23).
	Program      *Saved              `json:"program,omitempty"`
	Rehearsed    bool                `json:"rehearsed,omitempty"`
	Plan         []budget.PlanEffect `json:"plan,omitempty"`
	PlanID       string              `json:"plan_id,omitempty"`
	PlanApproval *PlanApproval       `json:"plan_approval,omitempty"`
}

// Saved names a saved program and its version.
type Saved struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Resumed says how a resumed execution began: how many of its calls were answered from the
// journal of its first run, not made again.
type Resumed struct {
	ReplayedCalls int `json:"replayed_calls"`
}

// Budget is what the binding meters counted, per execution and per Run.
type Budget struct {
	Execution budget.Usage `json:"execution"`
	Run       budget.Usage `json:"run"`
}

// Context is the context economy of run_code, per execution and per Run: what the program
// received from its tool calls beside what came back to the model. BindingBytes are the bytes
// of the values the program received from its tool calls and handle reads (built-ins
// included); ReturnedBytes the bytes of the result's text rendering, which is what the model
// reads; KeptOutBytes is BindingBytes less ReturnedBytes, never below zero (per Run: the sum
// over its executions).
type Context struct {
	Execution telemetry.Context `json:"execution"`
	Run       telemetry.Context `json:"run"`
}

// UpstreamProblem is what is wrong with a granted upstream server's tools, in words safe to
// show the model.
type UpstreamProblem struct {
	Server  string `json:"server"`
	Problem string `json:"problem"`
}

// resultOf is the result document of what the sandbox saw, with nothing added yet.
func resultOf(o *engine.Outcome) *Result {
	return &Result{Outcome: *o, Unavailable: []string{}}
}

// refuse is the result of an execution refused before anything ran.
func refuse(t engine.Terms, k failure.Kind, message string) *Result {
	return resultOf(engine.Refuse(t, k, message))
}

// contextOf is the context economy of an execution that received binding bytes and returned
// returned bytes to the model.
func contextOf(binding, returned int64) telemetry.Context {
	return telemetry.Context{BindingBytes: binding, ReturnedBytes: returned, KeptOutBytes: max(binding-returned, 0)}
}

// renderedBytes is the size of what a host hands its model of res (render, given the Run's
// binding budget limits), or of the result's JSON without a render.
func renderedBytes(res *Result, render func(*Result, budget.Limits) string, limits budget.Limits) int64 {
	if render != nil {
		return int64(len(render(res, limits)))
	}
	b, _ := json.Marshal(res)
	return int64(len(b))
}

// upstreamProblems are the granted servers with something wrong with their tools (one that
// could not be started, and why), for the result, in server order: a model whose program died
// of a NameError for a missing alias learns why.
func upstreamProblems(problems map[string]string) []UpstreamProblem {
	var out []UpstreamProblem
	for _, server := range slices.Sorted(maps.Keys(problems)) {
		out = append(out, UpstreamProblem{Server: server, Problem: problems[server]})
	}
	return out
}
