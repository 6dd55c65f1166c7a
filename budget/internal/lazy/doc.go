// Package lazy is the plumbing both run ledgers (budget/sqlite, budget/postgres) share for
// records that may lag (tool_call_finished, budget.Ticket.FinishLater): the flusher's Loop,
// the states of a queued write and the delay it waits for company. Each ledger keeps its own
// queue and flush; only the waiting is here.
//
// It imports the standard library only. A Loop is safe for concurrent use; one flusher
// goroutine waits on it, and its owner stops it with Halt.
package lazy
