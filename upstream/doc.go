// Package upstream is mcp-sandbox's side as an MCP (and A2A) client: a Pool of client sessions
// to one tenant's upstream servers and peers, the Catalogue of their tools under model-facing
// names, the tenant policy narrowed per turn (a Turn), and binding calls made through it.
//
// # Names
//
// A tool's model-facing name is "<server>__<tool>". Server names are lowercase letters, digits,
// "-" and single "_" (never "__"), so the first "__" always splits. A name has an alias exactly
// when it is an ASCII Python identifier and not a keyword (Aliasable); names are never mangled,
// so "docs__list-repos" (call_tool only) and "docs__list_repos" (also an alias) stay distinct.
// Non-ASCII identifiers are not aliased (reachable through call_tool) to keep one rule that every
// bootstrap can check without Python's Unicode tables.
//
// # Turns and policy
//
// Catalogue.Resolve narrows the catalogue for one turn (one run_code, one list_tools, one direct
// call): granted servers only, minus the deny globs; an agent's bindings list narrows the
// program's set further and never widens it. An explicit binding that resolves to nothing, or a
// glob binding that matches nothing, is reported by Turn.Unavailable and raises "unavailable"
// when called; it is never replaced. Globs: "*" matches any run of characters, every other
// character is literal.
//
// A call needs a person's approval (Turn.Approval, policy.go) when its tool matches an
// approval_required glob, when its server annotates it destructiveHint=true (unless the policy
// sets IgnoreDestructive: destructive_needs_approval false), or when an argument rule whose
// otherwise is approval_required does not allow the call's value; an argument rule whose
// otherwise is deny refuses the call (denied). Rules are a glob, a path of object keys, and an
// allowlist or an RE2 pattern over the value's text (Rule says how values compare); a rule never
// lifts another, nor a glob or a hint. Package binding asks the person, for a program's call
// and a direct call alike. Turn.NeedsApproval says whether a tool may need approval at all
// (exposure marks such tools destructive, get_tool_info says so). Unannotated tools (no
// annotations, or destructiveHint absent) are NOT treated as destructive even though the MCP
// spec's default for an absent hint is "true": almost no server annotates, and asking about
// every unannotated tool would make bindings useless. Operators list risky tools in
// approval_required instead.
//
// # Redaction
//
// One rule for what a person or a log line sees of what a call or an upstream carried
// (redact.go): URLs lose their userinfo, query and fragment (redactErr applies it to an
// error's URL); a call's arguments (Tool.RedactArguments) also lose the values of
// secret-looking keys and of properties the tool's schema marks writeOnly or format password,
// long strings are cut, and the whole is bounded.
//
// # Calls
//
// A binding call's walk lives in package binding; upstream supplies its policy steps and the
// call itself. Turn.Lookup finds a tool of a granted server that no deny glob matches
// (unavailable, denied; globs in path.Match syntax, "*" crossing any character, over upstream
// tools only: built-ins are binding's, and configs rejects a policy entry naming one), and
// that the catalogue does not hold as unavailable (unavailable, with its reason);
// Turn.Bound says whether the agent's bindings include it; Turn.Approval whether the call needs
// a person (or a rule denies it); Tool.Arguments validates the arguments against the tool's input schema
// (invalid_arguments). Schemas are compiled with github.com/google/jsonschema-go: draft 2020-12
// and draft-07 natively; one naming another draft is compiled under 2020-12 rules; one that
// still does not compile (a remote $ref among them: nothing is ever fetched) is logged and
// skipped, so the upstream judges. Turn.Invoke then calls
// the upstream with the argument bytes as sent. An Answer's Kind is one of failure.CallKinds,
// empty on success; failures of the upstream are tool_error (isError, with its text),
// upstream_error, timeout (the server's CallTimeout or the caller's deadline) and cancelled.
//
// A value is the result's structuredContent when present; else the text of a single text
// block; else the list of content blocks as the MCP objects (type, text / mimeType + data /
// uri …).
//
// # Untrusted upstreams
//
// An upstream's listing is untrusted input (admit.go, schema.go). A tool name must follow the
// MCP tool-name rules (1–128 characters of A-Z a-z 0-9 _ - ., the model-facing name
// included); other tools are skipped. Descriptions and titles are cut to bounds and cleaned of
// control characters, and Tool.Summary is one line, so no upstream text forges a line of the
// one-line-per-tool list the model reads. One listing reads at most maxListPages pages and
// maxListBytes of definitions; a server keeps at most maxToolsPerServer tools and
// maxServerBytes of them; re-listing after list_changed is held to relistBurst a minute.
// Whatever is skipped or cut is said in Catalogue.Problems (the log, and list_tools).
//
// An input schema over maxSchemaBytes or nested deeper than maxSchemaDepth, or with a cycle
// of in-place applications ($ref, $dynamicRef, allOf/anyOf/oneOf, not, if/then/else,
// dependentSchemas) that would recurse without consuming input, makes the tool unavailable
// (Tool.Unavailable): listed with its reason, not among a program's names nor exposed, refused
// when called. The validator itself has no bound, so before it runs, a walk over the schema
// graph and the arguments charges what it could cost (steps, errors quoting the instance,
// regular expressions, enums) and refuses a call past maxCheckDepth or maxCheckCost as
// invalid_arguments, "not checked". A panic of the schema library is recovered the same way.
// FuzzSchema holds that no schema and arguments crash or hang the process.
//
// # Connections
//
// Sessions are opened lazily, one per server per Pool. A session that ends (the process exits,
// ErrConnectionClosed, ErrSessionMissing, EOF, an over-long frame: any failure that is not the
// server's own JSON-RPC error answer) is dropped before the failed call returns; that call
// fails with upstream_error and is never replayed, and the next call reconnects (and the next
// Catalogue re-lists that server). Every call has its own timeout. Close is bounded: calls in
// flight are cancelled, stdin is closed, and the process tree is killed after a grace period.
//
// Pool.Catalogue lists every page of tools/list once per server and again only after the
// server sends notifications/tools/list_changed (or after a reconnect), so calling it at
// every turn boundary is cheap. A server that cannot be listed keeps its last known tools and
// is named in Catalogue.Problems with why, in words safe to show a model (its command was not
// found, it exited while starting, it timed out while starting (a first start gets
// FirstStartTimeout, and its whole tree is killed), it could not be reached: never a path, an address or a
// credential; the whole error goes to the log); it is retried at most every ten seconds. The
// model is told: list_tools notes each granted server's problem (problems), a call of one of
// its tools is unavailable with that reason, and Turn.Problems gives the same to run_code's
// result (upstream_problems). A stdio server's environment is built from nothing: PATH and HOME from ours plus
// Server.Env; its stderr goes to the Pool's logger, one record per line, with the server's name.
// Bearer credentials are resolved fresh for every HTTP request and never logged; plaintext http
// with a credential is refused unless the host is loopback or AllowInsecureHTTP is set.
//
// # A2A peers
//
// A Server with A2A set is an A2A agent (a2a.go). It sits where an MCP server's session sits,
// at the connection: its skills are the conn's listing and each call is one message/send, so
// naming, admission, deferral, list_tools, get_tool_info, deny, bindings, approval, argument
// validation, what package binding does around the call (admission to the budget, ledger
// records, paging into blobs) and the failure kinds apply to a skill exactly as to a tool;
// only the hop below Turn.Invoke (conn.call) differs.
//
//   - Protocol: A2A 0.3 over JSON-RPC (message/send, tasks/get, tasks/cancel), with the types
//     of github.com/a2aproject/a2a-go/a2a. Its client package (a2aclient) is not used: it
//     links gRPC and protobuf into the binary for a transport we do not speak, and its reads
//     are not bounded the way every upstream read is here. A v1.0 agent serves 0.3 when its
//     legacy compatibility is on (the official SDKs have it); a card declaring 1.x only is a
//     listing problem that says so. Every request carries "A2A-Version: 0.3".
//   - The card: read from <url>/.well-known/agent-card.json (or from the URL itself when it
//     names the card), at most 1 MiB, again after cardTTL (five minutes: a peer has no
//     list_changed) and after a call that failed in transport. Its JSON-RPC endpoint must be on
//     the configured URL's scheme, host and port, or the card is refused: the credential goes
//     nowhere else. At most 512 skills are read (the cut is said); each becomes a tool named by
//     its id, titled by its name, described by its description, up to five examples and its
//     input/output modes, and then passes the same admission as an MCP server's tools (names
//     under MCP's rule, repeats, sizes: skipped or cut and said in Problems, never mangled).
//   - The input: a skill has no schema, so every skill takes {text?: string, data?: object},
//     at least one, nothing else; text becomes a text part, data a data part, of one user
//     message whose metadata.skillId names the skill (A2A has no skill selector; an agent with
//     one skill may ignore it).
//   - The call: message/send with blocking false and historyLength 0. A Message answers at
//     once; a Task still submitted or working is polled with tasks/get (after 1 ms, doubling
//     to 500 ms) until it ends or the call's time does, and then it is cancelled on the peer
//     with tasks/cancel (best effort, 2 s): an abort around a binding call cancels the
//     operation in flight, which a blocking send cut short could not (the task's id would be
//     unknown); the price is a poll or two against an agent that answers at once. For the
//     same reason the send itself may outlive its call by those 2 s, to learn the id. Each
//     answer is bounded by the frame limit and all the answers of one call by twice that,
//     read as bytes arrive; only application/json is read.
//   - The answer: a completed task's artifact parts (with none, its final status message's); a
//     Message's parts. One text part is the value's text; one data part is the value; several
//     parts are a list of blocks: MCP content blocks for text and files (bytes as image, audio
//     or an embedded resource "a2a:file/<name>", a URI as a resource_link) and {"type": "data",
//     "data": …} for data. A task failed, rejected or canceled, or one asking for input or
//     authentication (a binding call cannot answer; the task is cancelled), is tool_error with
//     the agent's status text; so is the agent's own JSON-RPC error, except parse error, invalid
//     request and method not found, which say the two sides do not speak one protocol
//     (upstream_error). A refused connection is upstream_error "not called"; any other failure
//     is upstream_error, never sent again (POSTs are not retried by net/http either).
//   - Credentials and transport: the HTTP client of MCP HTTP upstreams (Server.httpClient): the
//     bearer resolved per request, sent only to the configured origin, redirects elsewhere
//     refused, plaintext http with a credential refused by Validate unless loopback or
//     AllowInsecureHTTP.
//
// # Imports and concurrency
//
// It imports failure, telemetry, the go-sdk, jsonschema-go, a2a-go (its protocol types, package a2a) and
// the standard library (DESIGN.md §2), never budget, outputs, binding, engine or configs: cmd
// fills the plain option structs, and package binding walks a call through Turn to satisfy
// engine.ToolCaller. Nothing here writes to stdout.
//
// A Pool, a Catalogue and a Turn are safe for concurrent use; a Catalogue and a Turn are
// immutable snapshots. Every goroutine a Pool starts (session watchers, OnToolsChanged calls,
// the closing of a server that failed to connect) is owned by the Pool and waited for by Close
// (bounded by its grace period); a stdio server's stderr reader and waiter are owned by its
// process and waited for when it is closed; an A2A call starts no goroutine of its own. The
// tests' TestMain checks that none outlives them. Lock order: Pool.mu before conn.mu before
// peer.mu; conn.lock (a channel, so waiting honours the context) is never held while taking
// Pool.mu.
package upstream
