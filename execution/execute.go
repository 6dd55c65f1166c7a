package execution

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/approval"
	"github.com/mcp-sandbox/mcp-sandbox/binding"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

// RecordTimeout bounds the recording done after the program ran (keeping outputs, reading
// the meters, the execution's end), which goes on when the caller's context has ended.
const RecordTimeout = 30 * time.Second

// Spec is an agent's code execution as the deployment resolved it: where its programs run and
// under which terms, budget and output policy.
type Spec struct {
	Sandbox engine.Sandbox
	// Terms are the agent's terms after every narrowing the caller knows of; Sandbox.Run may
	// narrow them once more. They are also what run_code's description states.
	Terms engine.Terms
	// Refusal, when non-empty, is why the agent's network request cannot be granted: every
	// execution is a network_unavailable refusal with this message, and nothing runs.
	Refusal string
	// Profile names the profile, for descriptions and logs.
	Profile string
	// Budget is the binding budget of the agent's programs: the profile's binding_budget
	// narrowed by the tenant policy. It is metered only when Options.Ledger is set.
	Budget budget.Limits
	// PreserveRequired (output.preserve: required) makes an output that could not be kept in
	// the blob store an output_not_preserved failure.
	PreserveRequired bool
	// MaxConcurrentCalls caps one execution's binding calls in flight; zero means
	// binding.DefaultMaxConcurrentCalls.
	MaxConcurrentCalls int
}

// Options are what executions share: where they are recorded and where outputs are kept. nil
// means defaults: nothing recorded or metered, no blob store, slog.Default().
type Options struct {
	// Ledger records the execution and its calls and meters the binding budget; nil means
	// nothing is recorded or metered.
	Ledger budget.Ledger
	// Blobs keeps outputs and large binding results under handles; nil means outputs are
	// previews only and a result over the per-call ceiling is binding_result_not_paged.
	Blobs outputs.BlobStore
	// Logger receives what the operator must know; each execution's lines also name it and
	// its Run.
	Logger *slog.Logger
	// Report counts executions, binding calls and kept outputs for the operator's metrics; the
	// zero Reporter counts nothing.
	Report telemetry.Reporter
	// Render is what a host hands its model of a result whose Run's binding budget is limits
	// (mcpserver.ModelReads, which run_code and `mcp-sandbox run` both give), whose size is
	// the context report's returned_bytes; nil means the result's JSON.
	Render func(res *Result, limits budget.Limits) string
	// Cassettes, when set, records each execution's binding calls and keeps its cassette
	// once it has ended (cassettes.record); a Program with a Tape of its own is not recorded.
	Cassettes CassetteKeeper
}

// CassetteKeeper records executions for `mcp-sandbox export` (package cassette, wired in
// cmd): Tape is the tape one execution's calls go through, and Keep keeps the cassette of
// what it recorded once the execution has ended, logging what goes wrong (an execution is not
// failed for a cassette it could not keep). Safe for concurrent use.
type CassetteKeeper interface {
	Tape() binding.Tape
	Keep(ctx context.Context, tape binding.Tape, executionID string, p Program, res *Result)
}

// Program is one program to execute and the turn it runs in.
type Program struct {
	Code string
	// Run is the Run the execution belongs to; its Tenant owns the handles the execution
	// produces.
	Run budget.RunRef
	// AgentVersion is the version hash of the agent whose program it is, for the record.
	AgentVersion string
	// Turn resolves the catalogue narrowed for this turn; it is called once, after the refusal
	// check, so a refused program starts no upstream. nil, or a nil Turn, means no upstream
	// tools (list_tools and get_tool_info still answer, run_code is still excluded_builtin).
	Turn func(context.Context) *upstream.Turn
	// Approvals is the approval step's configuration: who can be asked, and for how long; nil
	// means nobody can be asked, so a call that needs a person's approval is refused
	// (approval_required_in_program).
	Approvals *approval.Asking
	// Tape, when set, records the binding calls or plays them back (binding.Options.Tape).
	Tape binding.Tape
	// Saved names the saved program this is a call of (docs/design.md §23), recorded with the
	// execution and named in its result; Reach are then the only tools it may call (nil: all).
	Saved *Saved
	Reach []string
	// Nested are the saved programs the program may call like bindings (binding.Nested); nil:
	// none.
	Nested binding.Nested
	// Rehearse makes the execution a rehearsal (docs/design.md §22): calls of tools that are
	// not read-only are listed, not made, and the list is put to the person as one plan.
	Rehearse bool
	// Progress, when set, is called about once a second while the program runs (see
	// engine.Execution's Progress).
	Progress func(elapsedSeconds float64, stdout *outputs.Capture)
	// Started, when set, is told the execution's id once it is recorded (mcpserver's tasks
	// keep it, to say what a program lost with its server had done).
	Started func(executionID string)
	// Calls, when set, is handed the execution's bindings once they exist, before the program
	// runs (mcpserver's tasks note its calls so far: binding.Execution.NotedCalls).
	Calls func(x *binding.Execution)
	// Ran, when set, is called once the program and its calls have stopped, before its outputs
	// are kept (mcpserver's tasks stop their status writer and drop their partial copies of
	// the output then, which would otherwise take the blob quota the output is kept under).
	Ran func()
	// Admit, when set, takes the execution's place among those running at once (mcpserver's
	// quotas), after the refusal check and before anything is recorded: a failure it returns
	// (capacity_exceeded, or cancelled while it waited) is the result, and nothing is recorded
	// or run. release gives the place back; Execute calls it once it has recorded the end.
	Admit func(ctx context.Context) (release func(), fail *engine.Failure)
}

// Execute runs one program of the agent spec describes: recorded and metered in the ledger,
// its binding calls through package binding, its outputs kept under handles afterwards (the
// package doc lists the steps). The result is never nil; failures are in it.
func Execute(ctx context.Context, spec *Spec, p Program, opts *Options) *Result {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if spec.Refusal != "" {
		return observe(ctx, spec, refuse(spec.Terms, failure.NetworkUnavailable, spec.Refusal), o.Report, o.Logger)
	}
	if p.Admit != nil {
		release, fail := p.Admit(ctx)
		if fail != nil {
			return observe(ctx, spec, refuse(spec.Terms, fail.Kind, fail.Message), o.Report, o.Logger)
		}
		defer release()
	}
	// Every line about this execution, here and in the binding calls and upstreams it
	// reaches, names it and its Run.
	id := budget.NewID("x_")
	log := o.Logger.With("execution", id, "run", p.Run.ID)
	ctx = telemetry.WithLogger(ctx, log)
	telemetry.Current(ctx).Set(telemetry.String("mcp_sandbox.execution", id))
	var meter *budget.Meter
	if o.Ledger != nil {
		m, err := budget.Start(ctx, o.Ledger, p.Run, id, p.AgentVersion, spec.Budget)
		if err != nil {
			if ctx.Err() != nil {
				return observe(ctx, spec, refuse(spec.Terms, failure.Cancelled, "the request was cancelled before the execution started"), o.Report, log)
			}
			log.Error("execution not recorded, so not run", "err", err)
			return observe(ctx, spec, refuse(spec.Terms, failure.Internal, "the execution could not be recorded in the run ledger, so it was not run"), o.Report, log)
		}
		meter = m
		if p.Saved != nil {
			if err := o.Ledger.NoteProgramRun(ctx, p.Run.Tenant, budget.ProgramRun{ExecutionID: id, Name: p.Saved.Name, Version: p.Saved.Version}); err != nil {
				log.Error("the saved program's version not recorded with the execution", "program", p.Saved.Name, "err", err)
			}
		}
	}
	if p.Started != nil {
		p.Started(id)
	}
	var kept binding.Tape // the tape o.Cassettes keeps the cassette of
	if o.Cassettes != nil && p.Tape == nil {
		kept = o.Cassettes.Tape()
		p.Tape = kept
	}
	var turn *upstream.Turn
	if p.Turn != nil {
		turn = p.Turn(ctx)
	}
	x := binding.New(&binding.Options{Turn: turn, Meter: meter, Blobs: o.Blobs, Tenant: p.Run.Tenant,
		MaxConcurrentCalls: spec.MaxConcurrentCalls, Logger: log, Approvals: p.Approvals, Report: o.Report, Tape: p.Tape,
		Rehearse: p.Rehearse, Reach: p.Reach, Nested: p.Nested})
	if p.Calls != nil {
		p.Calls(x)
	}
	res := resultOf(spec.Sandbox.Run(ctx, engine.Execution{Program: p.Code, Terms: spec.Terms, Tools: x,
		ToolNames: x.Names(), Aliases: x.Aliases(), Signatures: x.Signatures(), Progress: p.Progress, Logger: log, Owner: p.Run.Tenant}))
	x.Wait()
	if p.Ran != nil {
		p.Ran()
	}
	if u := x.Unavailable(); len(u) > 0 {
		res.Unavailable = append([]string(nil), u...)
	}
	res.Approvals = x.Approvals()
	res.Program = p.Saved
	if p.Rehearse {
		res.Rehearsed, res.Plan = true, x.Plan()
		var plans budget.Plans
		if o.Ledger != nil {
			plans = o.Ledger
		}
		res.PlanID, res.PlanApproval = approvePlan(ctx, plans, p.Approvals, p, id, res.Plan)
	}
	res.ToolCalls, res.ToolCallsOmitted = x.ToolCalls()
	res.UpstreamProblems = upstreamProblems(x.Problems())
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RecordTimeout)
	defer cancel()
	k := keeper{blobs: o.Blobs, tenant: p.Run.Tenant, log: log, report: o.Report}
	recs := k.keep(rctx, &res.Outcome)
	if k.preserved > 0 && meter != nil {
		if err := meter.Charge(rctx, budget.Usage{PreservedBytes: k.preserved}); err != nil {
			log.Error("preserved bytes not charged", "err", err)
		}
	}
	if fail := k.failure(spec.PreserveRequired); fail != nil && res.Failure == nil {
		res.Failure = fail
	}
	if meter != nil {
		exec, run, err := meter.Usage(rctx)
		if err != nil {
			log.Error("run usage not read", "err", err)
		}
		res.Budget = Budget{Execution: exec, Run: run}
	}
	// The context economy last: what the model reads is the result as it now stands.
	res.Context.Execution = contextOf(x.ReceivedBytes(), renderedBytes(res, o.Render, spec.Budget))
	res.Context.Run = res.Context.Execution
	if meter != nil {
		status := "completed"
		if res.Failure != nil {
			status = string(res.Failure.Kind)
		}
		aj, _ := json.Marshal(recs)
		if res.Network != nil {
			meter.NoteNetwork(res.Network.Record())
		}
		if c, err := meter.End(rctx, status, aj, res.Context.Execution); err != nil {
			log.Error("execution end not recorded", "err", err)
		} else {
			res.Context.Run = c
		}
	}
	if kept != nil {
		o.Cassettes.Keep(rctx, kept, id, p, res)
	}
	return observe(ctx, spec, res, o.Report, log)
}
