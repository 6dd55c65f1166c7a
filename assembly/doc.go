// Package assembly builds the running server from a config the command has read and
// validated, as caddy's package builds what its cmd started (docs/design.md §2.2): each
// profile opened into its sandbox (a local backend through one switch, or the remote client),
// the upstream pools, the agents mcpserver serves, the run ledger and blob store, the
// webhook, the metrics listener, the sandbox service, and doctor's and check's reports. It
// reads no flag, writes nothing to stdout, and reaches the environment and files only through
// the Env the command hands it in a Config: a credential reference is resolved through it each
// time it is used, so a rotated secret takes effect at once.
//
// Serve opens the data dir (data_dir, default $XDG_STATE_HOME/mcp-sandbox or
// ~/.local/state/mcp-sandbox): the run ledger (budget/sqlite) and the blob store (files under
// DATA_DIR/blobs); or, with ledger.postgres or blobs.postgres, PostgreSQL (the DSN read from
// its reference and never logged or printed). It recovers the ledger at startup, logging each
// call a dead owner left in flight as unknown (counted, never replayed), and keeps doing so
// periodically; it sweeps blobs past their retention, and cassettes and paused calls past
// approvals.retention_hours. data_dir "-" with no shared store means no blob store and a
// private ledger removed at exit; output.preserve: required then refuses to start. An agent's
// binding budget is its profile's narrowed by its tenant policy's; an upstream's frame bound
// stays upstream.DefaultMaxFrameBytes whatever the budgets say.
//
// OpenAgent is one agent as stdio serve opens it, shared by run (OneShot: no warm child, no
// describe probe) and replay (Replaying: no upstream, every call answered from a cassette),
// so a program run from the shell gets the agent a host gets. A SIGHUP the command passes on
// re-reads the config through the Reload it hands in. Errors in the config are ConfigErrors,
// for which the command exits 2.
//
// It imports configs, engine and engine/backend/… (the rooms it wires), remote,
// remote/service, upstream, upstream/oauthclient, mcpserver, mcpserver/oauthrs, execution,
// approval, cassette, budget, budget/sqlite, budget/postgres, outputs, outputs/pgblob, egress,
// metrics, failure, internal/httpguard, internal/inithelper, internal/owner, internal/pgdb and
// internal/userns. Only the command imports it. Serve and ServeSandboxService run until their
// context ends; what they start (sweepers, the reloader, the metrics listener) is stopped and
// waited for before they return.
package assembly
