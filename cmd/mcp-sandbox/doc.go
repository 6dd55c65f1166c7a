// Command mcp-sandbox is the product: an MCP server that offers run_code, and the commands an
// operator uses around it (run, read-output, doctor, check, sandbox-service, image build, which
// assembles the container and cluster images from this host's files: docs/design.md §20,
// version). It is the only
// package that reads files, flags and the environment; it turns the YAML config into engine,
// backend and server values and wires them together. Logs go to stderr; stdout carries
// results, or protocol bytes only under `serve --transport stdio`.
//
// serve opens the data dir (data_dir, default $XDG_STATE_HOME/mcp-sandbox or
// ~/.local/state/mcp-sandbox): the run ledger (sqlite.Open in budget/sqlite) and the blob store
// (outputs.OpenFileStore in DATA_DIR/blobs); or, when the config has ledger.postgres or
// blobs.postgres, PostgreSQL (postgres.Open in budget/postgres, pgblob.Open; the DSN read from its
// reference and never logged or printed). At startup it recovers the ledger, logging each
// call a dead owner left in flight as unknown (counted, never replayed), and keeps doing so
// periodically (a SQLite file is shared by processes, a PostgreSQL ledger by replicas, and
// any of them may die while the others run on); and it runs the blob sweeper: blobs live
// --blob-retention (default 7 days, DefaultBlobRetention), swept hourly. data_dir "-" with no
// shared store means no blob store and a private ledger removed at exit (budgets still meter,
// but do not survive a restart); output.preserve: required then refuses to start. doctor names
// the stores in use and whether PostgreSQL answers. An agent's
// binding budget is its profile's binding_budget narrowed by its tenant policy's. An
// upstream's frame bound stays upstream.DefaultMaxFrameBytes whatever the budgets say: a
// larger answer is refused with a message that says so, since a bound that followed
// max_produced_bytes let two concurrent answers take the server's memory past a gigabyte.
//
// run is run_code from the shell, by construction: it opens the agent the way stdio serve does
// (openAgent: the profile, terms and refusal, budget, preserve, the tenant's upstream pool and
// policy), the same storage (openStorage), and hands the program to execution.Execute, the
// function mcpserver's run_code calls. What differs is what a one-shot command has no use for:
// no warm child and no describe probe at startup (oneShot; its one child is started, with
// engine.Runner.Prestart, before the ledger is opened, so the two overlap), no blob sweeper or periodic
// recovery (a serving process on the same data dir does both; run recovers once, at open), and
// its Run is its own (ended when it exits) unless --run names one (execution.NamedRun, the
// Run a host's _meta "mcp-sandbox/run" names). Its --log-level is warn by default: the result is on stdout.
// read-output is read_tool_output for a person: binding.Read over the config's blob store,
// the tenant's handles only.
//
// sandbox-service serves executions to the remote backend of servers elsewhere
// (package remote): it opens the profile sandbox_service names (a local one), and
// needs no data dir, upstream or tenant, because every binding call goes back to the caller.
// A remote profile opens the remote backend instead of a Runner; both are a profileSandbox.
//
// What the operator watches (operate.go; README "Operating it"): --log-format and --log-level,
// on every command, set the default slog handler on stderr; serve --metrics-listen serves
// package metrics' /metrics on a listener of its own (never the MCP one, whose callers are
// tenants), with the warm pools and upstream sessions read at each scrape, and tenant and
// agent labels only with --metrics-tenant-labels; and when the standard OTEL_EXPORTER_OTLP_*
// environment names an endpoint, serve installs the OpenTelemetry SDK's tracer provider with
// an OTLP/HTTP exporter as the global one, which package telemetry's spans go to (otherwise
// they stay OpenTelemetry's no-op). deploy/systemd's unit is checked by systemd_test.go.
//
// The first thing main does is dispatch the hidden init-helper subcommand (internal/launch),
// because every local sandbox child is this binary re-executed. Both that and `--version`
// are answered before main, from package initialisers (launch's, and internal/early's, which
// holds the build's Version), so neither pays for the server's package initialisers.
package main
