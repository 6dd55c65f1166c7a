// Package binding is the one home of a binding call: everything that happens between a
// program's `await tool(...)` reaching the host and its answer going back, in order, in one
// place (Execution.CallTool), plus a host's direct call (Direct; DirectKept keeps a large
// result under a handle, as a program's call would) and read_tool_output (Read),
// whose owner this package is for the host and the program alike.
//
// Why a package of its own, and the walk of one call hop by hop: docs/design.md §12.
//
// # Imports and concurrency
//
// It imports upstream, budget, outputs, toolcall (a call's answer), toolshape (Python names),
// approval (the question a call that needs a person's approval asks, which hop 5 builds from
// the tool and asks there), failure and telemetry (docs/design.md §2); never engine or
// mcpserver, and the engine never imports it: the engine's ToolCaller is satisfied because both
// speak toolcall.Answer. An Execution is safe for concurrent use (calls overlap, approvals too:
// each waits on its own question, its execution's approval.Questions taking turns); mu guards
// only its handle set, and is never held across a call or a question. Each finish goroutine
// is owned by its Execution and waited for by Wait.
package binding
