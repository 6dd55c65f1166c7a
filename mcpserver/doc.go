// Package mcpserver is the MCP face of mcp-sandbox: for one agent it builds a go-sdk
// mcp.Server offering run_code (only when the agent opted in to code execution), list_tools,
// get_tool_info and read_tool_output, renders engine results for the model, and serves those
// servers over streamable HTTP to many tenants (HTTPHandler) with bearer tokens, Host and
// Origin protection and a request body limit.
//
// Imports: engine, execution, binding, upstream, budget, outputs, failure, telemetry and the go-sdk only (DESIGN.md §2). It never imports
// configs: cmd converts the config into the small types here (Agent, CodeExec, Upstreams,
// HTTPOptions), hashes tokens and hands over a func(token) (tenant, ok).
//
// Decisions:
//   - Program failures and refusals (network_unavailable, isolation_unavailable,
//     backend_unavailable) are CallToolResults with isError: true and the engine Result as
//     structuredContent; JSON-RPC errors are kept for protocol faults (bad arguments).
//   - The agent's version hash is in the server instructions and in every run_code result's
//     _meta under "mcp-sandbox/agent_version".
//   - Progress: when a tools/call carries a progress token, run_code sends
//     notifications/progress about once a second with the elapsed seconds as progress and no
//     total (a program usually ends well before its wall clock). A send never blocks the
//     engine; a tick is dropped while the previous send is in flight.
//   - Cancellation: go-sdk cancels the handler's context on notifications/cancelled; that
//     context is the one passed to Sandbox.Run, which kills the program's tree.
//   - HTTP routing: /mcp is the token's tenant's default agent (its only agent, or the one
//     named "default"); /mcp/{agent} names one. A name that belongs only to another tenant
//     answers exactly like a name no tenant has (404, JSON naming only what was asked for and
//     the caller's own agents), so names cannot be probed.
//     A 401 carries WWW-Authenticate: Bearer (without it, clients start OAuth discovery).
//     Each (tenant, agent) pair has its own
//     StreamableHTTPHandler and sessions carry the tenant as their user, so a session id is
//     never usable from another tenant.
//   - Two revisions on one endpoint (stateless.go): a request whose MCP-Protocol-Version is
//     2026-07-28 or later (sessionless: server/discover, metadata in every request's _meta) goes
//     to the agent's stateless go-sdk handler, any other to its session handler. The header
//     alone decides. A sessionless request keeps no state in the process, so any replica can
//     answer it; a 2025-11-25 session lives in the replica that made it (a balancer keeps
//     affinity on Mcp-Session-Id).
//   - Upstream tools: every turn boundary (run_code, list_tools, get_tool_info, a direct call,
//     and the host's tools/list) resolves an upstream.Turn from the tenant's catalogue and the
//     agent's plain policy values (Upstreams). Without upstreams list_tools lists nothing and
//     get_tool_info answers "unknown".
//   - One run_code is execution.Execute (its doc lists the steps), the very path `mcp-sandbox
//     run` takes: the ledger's execution record, a binding.Execution over the Turn (package
//     binding's doc walks one call hop by hop) handed to the engine as the ToolCaller with its
//     names and aliases, unavailable_bindings, upstream_problems (and a "note on server" line
//     of the text, as in list_tools), outputs kept under handles, the budget report.
//     What is the session's is added here: the Run, the Turn (which also syncs the exposed
//     tools), progress, the Drain. A direct call of an exposed tool is binding.Direct; the host's
//     read_tool_output is binding.Read rendered for the host (any handle of the session's
//     tenant, 1 MiB a page; every handle the caller may not read gets one fixed text that does
//     not even echo the handle, so another tenant's handle reads exactly like one that never
//     existed).
//   - Runs and budgets (runs.go, execute.go): a Run is the MCP session (a stdio session, which
//     has no id, gets one for its lifetime; a sessionless HTTP request is its own Run) unless
//     the call's _meta names one under "mcp-sandbox/run"; named, session and request Runs are
//     kept apart by a prefix (execution.NamedRun for a named one, which `mcp-sandbox run --run`
//     names the same way). With Options.Ledger set, each run_code is a recorded, metered
//     execution; with Options.Blobs its outputs are kept under handles (execution's doc).
//   - Quotas (quotas.go; Options.Quotas, one for every agent's server of a process): a
//     run_code takes one of its tenant's execution slots and then one of the server's
//     (execution.Program.Admit), waiting in arrival order up to the tenant's Quota.Wait, and
//     otherwise answers a capacity_exceeded refusal (a result, isError, executed false;
//     nothing is recorded, as for the other refusals); a cancelled wait answers cancelled.
//     Over HTTP a request that makes a session (a 2025-11-25 POST without Mcp-Session-Id, any
//     2026-07-28 POST) is refused before go-sdk sees it when its tenant holds MaxSessions
//     (429) or the server does (503), each saying which and what to do. Quotas.Load reports,
//     per tenant and for the server, programs running and queued and sessions open (for
//     metrics). Stored bytes are the blob store's quota (outputs.WithQuota): an output past it
//     is preview_only with its Reason, or output_not_preserved under output.preserve: required.
//   - A text artifact the engine returned whole (Attachment.Text, up to the profile's preview
//     size) is rendered whole, beside its handle (execution keeps it location inline).
//   - Context economy: each run_code result reports context.execution, what the program
//     received from its calls (binding.Execution.ReceivedBytes) beside the bytes of the text
//     rendering the model reads (execution.Options.Render is RenderText) and the difference;
//     context.run is the same summed over the Run's executions in the ledger (without a
//     ledger, the execution's own). A run_code refused before any execution began reports
//     zeros.
//   - Direct calls of exposed tools are recorded too (budget.Direct), under the same Run, and
//     do not count against the binding budget.
//   - Direct exposure (Upstreams.Expose): the granted tools of non-deferred servers are added to
//     the server under their model-facing names (their own schema and annotations; the output
//     schema is left out because the direct result is our rendering) and removed when the policy
//     or the upstream withdraws them. The set is re-synced at each turn boundary and when an
//     upstream announces tools/list_changed (Upstreams.Watch); go-sdk then sends
//     notifications/tools/list_changed to every session. A tool whose input schema is not an
//     object schema is not exposed (go-sdk would refuse it) but stays bindable.
//   - Approvals (approvals.go): binding's approval step asks through the session that made the
//     tools/call (run_code or a direct call), with elicitation/create: a form with no fields,
//     whose message names the tool, why it needs approval and its redacted arguments; accept,
//     decline or cancel is the answer, and an optional _meta "mcp-sandbox/answered_by" in the
//     result says who gave it (recorded in the ledger). The wait is the agent's profile's
//     approvals.timeout_seconds (Upstreams.ApprovalTimeout). A client that did not declare
//     elicitation (form), or that speaks revision 2026-07-28 or later (go-sdk refuses
//     server-to-client requests there; its multi-round-trip input requests are not sent yet),
//     cannot be asked: the call is refused as approval_required_in_program with a message
//     saying so. Exposed tools that may need approval are annotated destructiveHint: true
//     (readOnlyHint false), and a run_code result carries the counts under "approvals".
//   - A direct call's value is rendered as structuredContent (an object) with its JSON as text,
//     or as text; a refusal or upstream failure is an isError result naming the kind.
//   - Telemetry (observe.go): every tools/call is a server span (package telemetry) under the
//     trace context of its _meta (traceparent, tracestate), named with the tool only when this
//     server offers it; run_code's binding calls and a direct call's upstream call are traced
//     under it. execution.Execute gives each execution its id before it starts (the ledger
//     records it under that id) and a logger naming it and its Run (the server's logger names
//     the tenant and agent), carried in its context to the binding calls and the upstreams and
//     handed to the engine (Execution.Logger); its end is one "run_code" line and one
//     telemetry.Execution (the agent's Reporter over Options.Metrics; level "none" and start
//     "none" for a refusal, start "unknown" from a backend that does not say, a remote one). A
//     kept output is counted (Kept "output"); a direct call is counted as a host's call.
//
// Goroutines: each session's Run-end watcher is counted by its server and, with a Drain, ended
// and waited for by Drain.Close (which the caller runs after Drain.Wait and before closing the
// ledger); progress senders are waited for by their run_code; a Drain's cancellation of an
// execution is a context.AfterFunc, unhooked when the execution ends. TestMain checks that no
// goroutine outlives the tests.
//
// Concurrency: a Server built by NewServer serves any number of sessions and calls at once;
// everything it holds after construction is read-only except the exposed tool set, guarded by
// handlers.exposedMu (taken before go-sdk's own server lock, never inside it). A Quotas' mu is
// likewise taken before a go-sdk server's lock (it asks Sessions) and never held while a
// program waits for a slot. HTTPHandler is safe for concurrent use.
package mcpserver
