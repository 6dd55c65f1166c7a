// Package execution is one program's execution for an agent, whoever asked for it: run_code
// (mcpserver) and `mcp-sandbox run` (cmd) both call Execute, so what a user tests from the
// shell is what the model gets, and the two cannot drift apart. Its Result is the result
// document (result.go): the engine's Outcome, what the sandbox saw, and what the host adds.
//
// Execute takes the agent's code execution as the deployment resolved it (Spec: the sandbox,
// the terms after every narrowing, a refusal, the binding budget, output.preserve), the turn
// the caller resolved (upstream.Turn: the tenant's catalogue under its policy and the agent's
// bindings) and the Run the program belongs to, and does, in order:
//
//  1. A refusal the Spec carries (a network request the tenant or profile does not grant) is
//     the result at once: nothing is recorded and nothing runs.
//     Then the caller's Program.Admit, when set, takes the execution's place among those
//     running at once (run_code: its tenant's quotas, waiting as they allow): a refusal
//     (capacity_exceeded) is the result at once too, and nothing is recorded or runs.
//  2. With a ledger, the execution is recorded (budget.Start) before anything runs; a ledger
//     that cannot record it refuses the execution (internal), since an unrecorded program
//     would spend an allowance nobody counts.
//  3. The turn is resolved (Program.Turn; after the refusal check, so a refused program starts
//     no upstream). A binding.Execution over the turn, the meter, the blob store and the
//     approval step (Program.Approvals: who can be asked; run_code asks by elicitation, `run`
//     has nobody to ask) is the engine's ToolCaller, with the turn's names (TOOLS) and aliases;
//     the sandbox runs the program.
//  4. unavailable_bindings is the turn's Unavailable; approvals counts the approval step's
//     decisions.
//  5. Outputs are kept (outputs.go): a stream larger than its preview, a large value and every
//     artifact go to the blob store under a handle (location blob, bytes charged as preserved);
//     a stream that fits its preview stays inline. Without a store, or when a Put fails, they
//     are preview_only and the ledger's attachment record says how many bytes were let go
//     (let_go_bytes); with Spec.PreserveRequired that is an output_not_preserved failure.
//  6. The budget report (per execution and per Run, the Run half read from the ledger), then
//     the context economy: context.execution is what the program received from its calls
//     (binding_bytes) beside the size of what a host hands its model of the result
//     (returned_bytes: Options.Render: mcpserver.ModelReads for run_code and `run` alike) and the
//     difference (kept_out_bytes). The execution's end is recorded with its status,
//     attachments and context, and context.run is the Run's sum, read back from the ledger.
//     With Options.Cassettes (serve's cassettes.record), the execution's calls went through
//     its Tape, and its cassette is kept now (docs/design.md §17).
//  7. Every execution that ends, a refusal included, is reported (observe.go).
//
// What stays with each caller is what differs by nature: how the Run is named (an MCP
// session, _meta "mcp-sandbox/run" through NamedRun, or a one-shot command's own Run), how the
// turn is resolved (mcpserver also syncs its exposed tools), who can be asked for approval,
// progress notifications, shutdown draining, and rendering.
//
// It imports engine, binding, approval (how a program's questions are asked, and their counts),
// upstream, budget, outputs, failure and telemetry (docs/design.md §2): it wires the engine to a
// binding call's home and reports what happened (metrics through
// Options.Report, the span's attributes, the log line "run_code" on the execution's logger,
// whose lines name the execution and its Run); it never imports the go-sdk, mcpserver or
// configs.
//
// Concurrency: Execute may be called by any number of goroutines at once; it holds no state
// between calls. The binding.Execution's finish records are waited for before the meters are
// read; recording after the program runs uses a context that outlives the caller's
// cancellation, bounded by RecordTimeout.
package execution
