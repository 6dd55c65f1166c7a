// Package approval is the one home of a call that needs a person's approval, between the
// binding call that needs it and the execution that waits on it: the question, its pause, and
// its answer from any path — the person, through the MCP client's elicitation or a retry of a
// held call (an Asker: how a question crosses MCP is mcpserver's), an operator (`mcp-sandbox
// approvals`, the /v1/approvals route), the wait's end — and the webhook that tells an
// operator of it. docs/design.md §11 says how.
//
// Asking.Ask is hop 5 of a binding call (docs/design.md §12.2) once policy says the call needs
// approval: recorded pending, asked in its execution's turn (Questions), its decision recorded
// and counted. A Room keeps each question as a pause row in a store (the run ledger's pauses,
// shared by every replica; without one, this process's memory): the row is the question's one
// state, answered once and claimed once, and each question has one waiter in the process that
// asked it. Answers from another process are seen by the Room's one poller. Standing answers
// (a resumed call's, Once) and journals (a program's calls, kept with the pause) are
// interfaces, so a task or an approved plan is one more Asker or Standing, not a case here.
//
// # Imports and concurrency
//
// It imports budget (records, pauses), failure, telemetry and the standard library; never
// upstream, binding, cassette or mcpserver: binding builds the question from the tool and
// asks through an Asking, mcpserver supplies the Asker. Asking, Questions, Room and Webhook
// are safe for concurrent use. A Room owns its poller, which runs only while a question
// waits; each question's Asker runs on a goroutine its Ask waits for before it returns; a
// Webhook's sender is waited for by Close.
package approval
