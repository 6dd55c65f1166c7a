package launch

// The helper runs from this package's initialiser, not only from main: Go initialises a
// package as soon as its own imports are and no package before it in import-path order is
// ready, so the helper starts before the initialisers of the packages the server needs and
// it does not (metrics, telemetry exporters, the SQL driver, the MCP SDK), which were most
// of the binary's start (cmd/mcp-sandbox's TestInitHelperSkipsServerInits pins it).
func init() { MaybeMain() }
