// Package configs is the YAML configuration of mcp-sandbox (DESIGN.md §3.2): its types, strict
// loading, defaults, validation (what `mcp-sandbox check` reports), the agent version hash,
// the embedded default.yaml and the example files under examples/ (each parsed by a test).
//
// It imports the failure package, the standard library and go.yaml.in/yaml/v3, nothing else of
// the project: cmd turns a Config into engine, upstream and mcpserver values, so none of those
// depend on YAML and this package depends on none of them. It reads files only in Load and
// LoadTenantsDir, and never reads the environment: Credential.Resolve and DefaultDataDir take
// the lookup from their caller.
//
// A *Config returned by Parse, Load or Default is complete (defaults filled) and valid, and is
// never modified afterwards, by this package or, by convention, by anyone: it is safe for
// concurrent use, and a reload builds a new one.
//
// Decisions the design left open:
//
//   - Strictness comes from a walk over yaml.Node rather than yaml.v3's decoder, whose errors
//     name Go types instead of key paths. Every problem names file, line and key path:
//     "default.yaml:7: profiles.default.hard_limits.cpu_secs: unknown key". Unknown keys,
//     duplicate keys, wrong types, local tags (!env), merge keys (<<), an empty document and a
//     second document are errors; aliases are followed, with a bound on total nodes. A string
//     field takes only a YAML string (`python: 3.12` is an error asking for quotes). Error
//     messages describe a misplaced value ("got a string") and never quote it, so a secret
//     pasted in the wrong place is not echoed into a log. A YAML syntax error is the exception
//     that proves it: it names the line where it is (yaml.v3 names where the enclosing
//     construct began, so the line is found again, see syntaxProblem and misindented) and quotes that line,
//     because a typo is found by reading it, but never the value of a key that names a
//     credential (token, bearer, secret, password, dsn).
//   - Options.Backends (LoadWith) are the backends the loading build has; a profile naming
//     another backend of the schema is an error there, so `check` refuses what `serve` could
//     not run. Load, Parse and Validate accept every backend the schema names.
//   - All problems are reported at once, sorted by file then line, as Problems inside a
//     *failure.Error of kind ConfigInvalid. If decoding fails, validation is not attempted:
//     checking a half-decoded config would add misleading problems.
//   - A null value means the key is absent. bindings is the one place the difference between
//     null and an empty list matters: null is every callable tool, [] is none.
//   - data_dir "-" means "no data directory", hence no blob store, and makes
//     `preserve: required` a config error. "" means DefaultDataDir, resolved by cmd.
//   - `sandbox:` beside profiles.default is an error; otherwise it is folded into
//     Profiles["default"] and Config.Sandbox is nil after loading.
//   - code_execution.profile defaults to "default". Profiles are never implied: an agent
//     naming a profile that is not written down is an error.
//   - Profile, tenant and agent names: letters, digits, '.', '_', '-', at most 64, starting
//     and ending alphanumeric (they become flags, file names and record fields). Upstream
//     names are stricter (lowercase words joined by one '-' or '_') so that "<upstream>__<tool>"
//     splits at the first "__".
//   - Zero is not a limit or a budget: every count and size must be positive. To allow no
//     binding calls, list no bindings (bindings: []).
//   - A tenant needs at least one agent; a config needs at least one tenant unless it sets
//     tenants_dir. A deny or approval pattern naming an unknown upstream, or a literal name
//     that can match no tool, is an error: a misspelt deny entry would otherwise deny nothing.
//   - Static contradictions are config errors (backend process with isolation isolated; a
//     bearer over plaintext http to a non-loopback host without allow_insecure_http; a URL with
//     userinfo). Run-time questions are not: network: unrestricted on an agent whose profile
//     has no network is a refusal when the program runs, and whether an upstream still offers
//     a bound tool is never checked here.
//   - container: only a profile with backend container may carry the block, and every such
//     profile has one after defaults (image localhost/mcp-sandbox-python:latest, python
//     /usr/bin/python3). runtime is docker, podman or an absolute path to either; image is a
//     reference (name[:tag] or name@sha256:digest, the name lowercase); python is an absolute,
//     clean path inside the image; oci_runtime a name or an absolute path. The profile's own
//     python (the host's interpreter) beside backend container is an error. Whether the
//     runtime answers or the image is present is a run-time question (doctor, a refusal).
//   - Quotas (the top-level `quotas:` for the whole server, `policy: {quotas: …}` per tenant)
//     are read through Config.ServerQuotas and Config.TenantQuotas, which fill their
//     defaults: a tenant's defaults depend on the server's (never above them), so they are
//     not written into the Config, and a tenant value above the server's is an error, since
//     it could never be reached. queue_seconds 0 is allowed (refuse at once): it is a wait,
//     not a limit. Quotas are left out of AgentVersion: they are the host's capacity, not
//     what the agent is.
//   - Load resolves relative paths (data_dir, tenants_dir, bearer file, a command[0] with a
//     slash) against the config file's directory; Parse leaves them as written.
//   - AgentVersion hashes canonical JSON (encoding/json of the structs: fixed field order,
//     sorted map keys) with set-like lists sorted; tokens and upstream addresses are excluded.
package configs
