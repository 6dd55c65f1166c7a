// Package configs is the YAML configuration of mcp-sandbox (docs/design.md §3.2): its types, strict
// loading, defaults, validation (what `mcp-sandbox check` reports), the agent version hash,
// the embedded default.yaml and the example files under examples/ (each parsed by a test).
//
// It imports the failure package, the standard library, go.yaml.in/yaml/v3, egress (the
// network rule language it validates, a leaf) and internal/nearest (a misspelt key's "did you
// mean"), nothing else of the project: cmd turns a Config into engine, upstream and mcpserver values, so none of those
// depend on YAML and this package depends on none of them. It reads files only in Load and
// LoadTenantsDir, and never reads the environment: Credential.Resolve and DefaultDataDir take
// the lookup from their caller.
//
// A *Config returned by Parse, Load or Default is complete (defaults filled) and valid, and is
// never modified afterwards, by this package or, by convention, by anyone: it is safe for
// concurrent use, and a reload builds a new one.
//
// The decisions the design left open (strictness, null and empty, names, limits, quotas,
// relative paths, the agent version): docs/design.md §15.
package configs
