// Package binding is the one home of a binding call: everything that happens between a
// program's `await tool(...)` reaching the host and its answer going back, in order, in one
// place (Execution.CallTool), plus a host's direct call (Direct) and read_tool_output (Read),
// whose owner this package is for the host and the program alike.
//
// # Why a package of its own
//
// DESIGN.md §2 allows the call to live in upstream or here. Here, because a call is more than
// the upstream: it is metered and recorded (budget), paged into blobs (outputs) and will be
// approved, traced and counted. Inside upstream, those steps came back in as a chain of
// Callers and a context slot to carry the handle home; here upstream is one step of the walk
// (policy lookups and Invoke) and knows nothing of budgets, blobs or the engine.
//
// # The walk of one call
//
// The engine's session reads a `call {id, tool, args}` frame from the child and calls
// engine.ToolCaller.CallTool, which is *Execution (mcpserver hands it to the engine in the
// engine.Execution, with the program's names and aliases, which Execution computes once from
// its upstream.Turn). CallTool then takes these hops, each of which may end the call with a
// Reply whose Kind is one of failure.CallKinds:
//
//  1. Built-ins: list_tools and get_tool_info are answered from the Turn, and count like any
//     call: a request they refuse (invalid arguments, an unknown or denied tool) is refused
//     unspent, as hops 2-4 refuse a tool call; an answer takes a call slot (6), is admitted
//     (7: tool_call_started under the built-in's name, so it is spent and counted per
//     execution and per Run), crosses only within the transfer allowance (9: else
//     binding_result_too_large over max_result_bytes, budget_exceeded otherwise; never cut)
//     and is recorded finished (10). read_tool_output reads one of this execution's own
//     handles (hop 11), which meters the page as transfer and is not a call; run_code is
//     excluded_builtin; any other name without "__" is unavailable.
//  2. Policy (Turn.Lookup): a tool of a granted server (else unavailable), not matched by a
//     deny glob (else denied), that the catalogue does not hold as unavailable (a schema it
//     cannot check, say: unavailable with the reason).
//  3. Bindings (Turn.Bound): among the agent's bindings, else unavailable.
//  4. Arguments (Tool.Arguments): a JSON object that matches the input schema, else
//     invalid_arguments; the upstream later receives the bytes as sent.
//  5. Approval (approval.go, Approvals.approve; its outcome is a Decision): an argument rule
//     of the tenant's policy (Turn.Approval) may deny the call here. A call that needs a
//     person's approval (an approval_required glob, the server's destructiveHint unless the
//     policy turns that off, an argument rule) is put to the person through the Asker
//     (mcpserver: elicitation/create on the host's session), recorded pending first
//     (budget.Meter.AskApproval) and decided after (DecideApproval, with who answered).
//     Inside a program the call waits in place: the child waits on its channel, its wall
//     clock runs, its CPU does not. Accept: the call goes on, once, recorded under the call id
//     its approval named. Decline or dismiss: denied. No answer within Approvals.Timeout (and
//     a second before the program's wall clock): approval_required_in_program, and the
//     program goes on. A host that cannot ask (no Asker, no elicitation capability, the
//     sessionless revision) gets approval_required_in_program at once, recorded unasked
//     (counted past the first few per tool: budget's "Refusals are counted", and logged
//     one by one only for the execution's first loggedUnasked), with a message that says so
//     and names no other tool. The person sees the model-facing name, the reasons and every
//     key path of the arguments with its value in full (upstream.Tool.ApprovalView: the
//     schema's properties first, only schema-declared secrets hidden, and named with why);
//     arguments that cannot be shown so (too deep, too large, a string under a secret-looking
//     name) are refused unasked with the reason: a person is never asked an incomplete
//     question. One question of an execution is open at a time (asking): the others wait
//     their turn within their own approval wait, or are refused unasked when it lapses; after
//     maxDeclinesInARow declines or dismissals of one tool in a row, its calls are refused
//     (denied) unasked, so the ledger summarises them as it does unasked refusals. The log
//     line shows the arguments redacted and cut (upstream.Tool.RedactArguments).
//     Nothing is spent: a refused call never reaches admission, and an acceptance that cannot
//     be recorded (or was recorded unknown after a restart) is not acted on.
//  6. A call slot: at most Options.MaxConcurrentCalls calls of the execution in flight. The
//     wait ends with the context (timeout or cancelled) and such a call is never spent.
//  7. Admission (budget.Meter.Admit): argument_too_large or budget_exceeded are recorded as
//     refused and never spent (past the first few per tool and kind, counted and recorded
//     as one summary when the execution ends); otherwise tool_call_started is written and the call is spent,
//     whatever follows. A ledger failure is upstream_error: the call was not made.
//  8. The upstream call (Turn.Invoke): tool_error (the upstream said isError), upstream_error,
//     timeout, cancelled; an upstream.Answer with the value and the bytes produced.
//  9. Delivery: a value nested deeper than maxResultDepth is invalid_result (a program's JSON
//     decoder recurses, and one that died on it left the program waiting for its wall clock;
//     upstream refuses one deeper than its decoder goes the same way). A value within the transfer allowance (budget.Ticket.Reserve) crosses whole.
//     Over it, the value is kept in the blob store (a string as its text, anything else as
//     indented JSON, so line windows can be narrower than the value), charged as preserved
//     bytes and the handle's own bytes as transfer, recorded as this execution's, and the
//     program gets an outputs.HandleRef; without a store, or when it fails, the tenant's
//     stored-bytes quota has no room (the message says so) or the budget has no room left,
//     binding_result_not_paged.
//  10. tool_call_finished (succeeded, failed, or aborted when cancelled; bytes produced,
//     transferred, preserved; the handle as attachment) is written on its own goroutine while
//     the Reply travels to the program; first, when the ledger's lease may have lapsed
//     (budget.Meter.CallsSurelyOpen), and a call a survivor recorded unknown meanwhile has its
//     result withheld (upstream_error saying so), its bytes charged all the same. Execution.Wait waits for these before the execution's
//     meters are read and its end recorded.
//  11. Handle reads: the child's `read {handle, offset, limit, pattern}` frames, and
//     read_tool_output called inside the program, reach Execution.ReadHandle: only this
//     execution's handles (any other reads "no handle of this execution is known"), a page no
//     wider than the transfer allowance (else binding_result_too_large), charged as transfer.
//     The host's read_tool_output tool uses the same Read, over any handle of its tenant, with
//     a 1 MiB page.
//
// Traced and counted (observe.go): CallTool wraps the walk in a span (under the run_code's;
// the upstream call's span is upstream's, under it) and, when it ends, reports the call
// (telemetry.Reporter: upstream and outcome, duration), and reads off the Reply what else the
// operator counts: a budget refusal and its meter (budget.RefusedMeter), a result kept under a
// handle. The walk itself holds no hook; the approval step reports each decision it makes, for
// a program's call or a direct one, through Approvals.Report.
//
// Nothing is translated on the way: upstream, budget and this package fail a call with
// failure.Kind values of failure.CallKinds, and the Reply (package outputs, the leaf both the
// engine and this package import) carries the kind to the engine, which writes it in the
// `result` frame. Without a meter (no ledger) hops 7 and 10 are skipped and values cross
// whole. Every value handed to the program (a handle as the JSON that crosses for it) is
// counted in ReceivedBytes, the binding_bytes of run_code's context report.
//
// A ledger record per built-in call: the per-Run half of the calls meter is counted from the
// ledger, so a call counted per Run is a call recorded, and one that is not recorded would give
// each new program of the Run a fresh allowance of reads. The cost is the cost of any call (two
// commits) and is bounded by the same max_calls; a catalogue read that costs nothing is what
// let a program pull 644 KB of catalogue with a budget of 5 calls and 20 KB.
//
// A host's direct call (Direct) takes hops 2, 4, 5 (the same approval, the same records), 7
// (under budget.Direct: recorded, outside the binding budget), 8 and 10 (synchronously), and
// the whole value: no bindings, no slot, no paging.
//
// # Imports and concurrency
//
// It imports upstream, budget, outputs, failure and telemetry (DESIGN.md §2); never engine or mcpserver,
// and the engine never imports it: the engine's ToolCaller is satisfied because both speak
// outputs.Reply. An Execution is safe for concurrent use (calls overlap, approvals too: each
// waits on its own question); mu guards only its handle set, and the tally's own mutex only
// its counts; neither is held across a call or a question. Each finish goroutine is owned by its Execution
// and waited for by Wait.
package binding
