// Package ledgertest is the contract every budget.Ledger must pass, run by the tests of each
// implementation (budget/sqlite, budget/postgres), and the setup those tests share: calls
// admitted exactly under racing starts, per execution and per Run and between openers; byte
// charges; tenant scoping; approvals; bounded refusal records whose Times sum exactly; and
// recovery, once, of the calls of an owner that died, whoever survives it; cassettes; observed
// shapes merged exactly under racing merges, per tenant and bounded. KillChild and
// CrashChild kill a real process that holds a started call.
//
// It imports budget, failure, telemetry (the context economy), internal/gate (its waits scale
// with load), go-cmp and the standard library, and is for tests only.
package ledgertest
