// Package programs is the one home of saved programs (docs/design.md §23): a program saved
// under a name for a tenant (optionally for one of its agents), its parameters read from its
// one `async def main(...)` (toolshape.MainInput), its version the hash of its text, kept in
// the run ledger (budget.Programs) so every replica serves it. Here are saving, listing,
// showing and deleting (what `mcp-sandbox programs` and the operator's /v1/programs route
// do), which programs an agent is offered and under which tool names, the tools a program
// can reach (Reach: its annotations follow from them), and the program one call of it runs
// (Program: the text, then main awaited with the call's arguments).
//
// # Imports and concurrency
//
// It imports budget (the store) and toolshape (main's signature as an input schema, and the
// arguments' check) only; never upstream, execution or mcpserver: mcpserver
// offers the tools and runs a call through execution, cmd parses the command's flags. Its
// functions hold no state of their own and are safe for concurrent use.
package programs
