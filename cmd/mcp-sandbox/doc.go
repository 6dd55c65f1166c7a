// Command mcp-sandbox is the product: an MCP server that offers run_code, and the commands an
// operator uses around it (run, replay, export, read-output, approvals, doctor, check,
// sandbox-service, image build, which assembles the container and cluster images from this
// host's files: docs/design.md §20, version). It is the entrance (docs/design.md §2.2): its
// flags, subcommands, help texts and exit statuses, and the only package that reads flags,
// files and the environment. It reads and validates the config (configs) and hands it, with
// the environment its credentials resolve in (assembly.Env), to package assembly, which builds
// the running server; it never converts the config into runtime values itself. Logs go to
// stderr; stdout carries results, or protocol bytes only under `serve --transport stdio`.
//
// run is run_code from the shell, by construction: it opens the agent the way stdio serve
// does (assembly.OpenAgent) and the same storage, and hands the program to
// execution.Execute, the function mcpserver's run_code calls. Its one child is started
// (engine.Runner.Prestart) before the ledger is opened, so the two overlap; its Run is its own
// (ended when it exits) unless --run names one (execution.NamedRun). Its --log-level is warn
// by default: the result is on stdout. replay runs a program against the cassettes it reads,
// and cassette judges each; export writes what the ledger kept, scrubbed, to files of the
// owner's only (writePrivate); read-output is read_tool_output for a person.
//
// What the operator watches (operate.go; README "Operating it"): --log-format and --log-level,
// on every command, set the default slog handler on stderr; serve --metrics-listen serves
// package metrics' /metrics on a listener of its own; and when the standard
// OTEL_EXPORTER_OTLP_* environment names an endpoint, serve installs the OpenTelemetry SDK's
// tracer provider with an OTLP/HTTP exporter as the global one, which package telemetry's
// spans go to. serve and run also tune Go's collector (gc.go) unless GOGC or GOMEMLIMIT is set, and
// subscribes to SIGHUP before anything else, so a reload asked for while it starts waits.
// deploy/systemd's unit is checked by systemd_test.go.
//
// The first thing main does is dispatch the hidden init-helper subcommand (internal/launch),
// because every local sandbox child is this binary re-executed, and the jobobject backend's
// probe children. Both that and `--version` are answered before main, from package
// initialisers (launch's, and internal/early's, which holds the build's Version), so neither
// pays for the server's package initialisers.
package main
