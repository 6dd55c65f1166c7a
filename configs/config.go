package configs

import (
	"bytes"
	_ "embed"
)

// Values the schema gives a meaning to. They are spelled here once so that cmd, the engine's
// wiring and the tests agree on them.
const (
	// DefaultProfileName is the profile an agent's code_execution names when it names none,
	// and the name a top-level `sandbox:` block registers under.
	DefaultProfileName = "default"

	// NoDataDir as data_dir means the deployment has no data directory and so no blob store.
	// `preserve: required` is then a config error: it could never be honoured.
	NoDataDir = "-"

	BackendLocal      = "local" // the strongest local backend reaching the profile's isolation
	BackendProcess    = "process"
	BackendNamespaces = "namespaces"
	BackendBwrap      = "bwrap"
	BackendContainer  = "container"
	BackendRemote     = "remote"

	IsolationProcess  = "process"
	IsolationIsolated = "isolated"

	PreserveWhenAvailable = "when_available"
	PreserveRequired      = "required"

	CollectionCollect = "collect"
	CollectionIgnore  = "ignore"

	NetworkNone         = "none"
	NetworkUnrestricted = "unrestricted"
	NetworkRules        = "rules" // through the egress proxy, by the profile's network block

	// ToolRunCode is reserved: no agent, binding or upstream can claim it.
	ToolRunCode = "run_code"
	// The built-in tools a program may bind.
	ToolListTools      = "list_tools"
	ToolGetToolInfo    = "get_tool_info"
	ToolReadToolOutput = "read_tool_output"
)

// Config is one deployment's configuration, docs/design.md §3.2. After Parse or Load every profile
// carries its defaults, `sandbox:` has been folded into Profiles["default"] (Sandbox is nil),
// tenants from tenants_dir are merged into Tenants, and the whole has been validated.
type Config struct {
	// DataDir holds the run ledger and blobs. "" means DefaultDataDir; NoDataDir ("-") means
	// there is none, so no blob store.
	DataDir   string              `yaml:"data_dir" json:"data_dir"`
	Profiles  map[string]Profile  `yaml:"profiles" json:"profiles"`
	Upstreams map[string]Upstream `yaml:"upstreams" json:"upstreams"`
	Tenants   map[string]Tenant   `yaml:"tenants" json:"tenants"`
	// TenantsDir adds one file per tenant, DIR/<tenant>.yaml, each holding that tenant's block.
	TenantsDir string `yaml:"tenants_dir" json:"tenants_dir"`
	// Sandbox is the top-level `sandbox:` block: one profile, registered as "default". Only a
	// hand-built Config carries it; Parse and Load move it into Profiles.
	Sandbox *Profile `yaml:"sandbox" json:"sandbox,omitempty"`
	// Ledger is where Runs, executions and tool calls are recorded and budgets counted; nil
	// means the SQLite ledger under DataDir.
	Ledger *Ledger `yaml:"ledger" json:"ledger,omitempty"`
	// Blobs is where kept outputs and large results live; nil means files under DataDir.
	Blobs *Blobs `yaml:"blobs" json:"blobs,omitempty"`
	// Quotas bound what the server holds at once, every tenant together (concurrent
	// executions, sessions, stored bytes); ServerQuotas fills the defaults.
	Quotas ServerQuotas `yaml:"quotas" json:"quotas"`
	// SandboxService is read by `mcp-sandbox sandbox-service` only: who may send it
	// executions and which profile runs them. A config with it needs no tenant.
	SandboxService *SandboxService `yaml:"sandbox_service" json:"sandbox_service,omitempty"`
	// Approvals is the top-level approvals block (docs/design.md §10): the server's side of
	// asking, where a profile's approvals say how long a call waits.
	Approvals ServerApprovals `yaml:"approvals" json:"approvals"`
	// Cassettes says whether serve records executions for export, and what a cassette keeps.
	Cassettes Cassettes `yaml:"cassettes" json:"cassettes"`
	// Auth is how HTTP callers authenticate besides the tenants' static tokens.
	Auth Auth `yaml:"auth" json:"auth,omitzero"`
	// Egress, when set, is where the server itself may connect: every url and a2a upstream
	// must pass its rules (docs/design.md §18), or the config is refused.
	Egress *EgressRules `yaml:"egress" json:"egress,omitempty"`
}

// EgressRules are allow and deny lists in the network rule language (package egress): a host,
// a *.suffix, an address, each with an optional :port, or a URL prefix with methods.
type EgressRules struct {
	Allow []string `yaml:"allow" json:"allow"`
	Deny  []string `yaml:"deny" json:"deny"`
}

// ProfileNetwork is a profile's network by rules: what its programs may reach through the
// host's egress proxy when an agent asks for network: rules.
type ProfileNetwork struct {
	Allow []string `yaml:"allow" json:"allow"`
	Deny  []string `yaml:"deny" json:"deny"`
	// Credentials are headers the proxy adds to HTTPS requests for a host; the program never
	// sees the secret.
	Credentials []NetworkCredential `yaml:"credentials" json:"credentials,omitempty"`
	// MaxBytes bounds the bytes through the proxy per execution, both ways; nil: 64MiB.
	MaxBytes *ByteSize `yaml:"max_bytes" json:"max_bytes,omitempty"`
}

// NetworkCredential is one header the egress proxy adds for Host (a name or *.suffix).
type NetworkCredential struct {
	Host   string     `yaml:"host" json:"host"`
	Header string     `yaml:"header" json:"header"`
	Value  Credential `yaml:"value" json:"value"`
}

// Auth is the top-level auth block (docs/design.md §10).
type Auth struct {
	// OAuth admits tenants by OAuth access tokens: this server is a resource server.
	OAuth *OAuth `yaml:"oauth" json:"oauth,omitempty"`
}

// OAuth names the trusted issuers, this server's resource URI (the audience a token must
// carry) and the claim that names a tenant's subject (tenants' oauth.subjects).
type OAuth struct {
	Resource    string        `yaml:"resource" json:"resource"`
	Issuers     []OAuthIssuer `yaml:"issuers" json:"issuers"`
	TenantClaim string        `yaml:"tenant_claim" json:"tenant_claim"` // default "sub"
}

// OAuthIssuer is one trusted authorization server, by its issuer identifier; its metadata and
// keys are discovered (RFC 8414, OpenID discovery).
type OAuthIssuer struct {
	Issuer string `yaml:"issuer" json:"issuer"`
	// Introspection, when set, checks opaque (non-JWT) tokens at the issuer's
	// introspection_endpoint (RFC 7662) as this client.
	Introspection *Introspection `yaml:"introspection" json:"introspection,omitempty"`
}

// Introspection is the client an issuer's introspection endpoint is called as.
type Introspection struct {
	ClientID     string     `yaml:"client_id" json:"client_id"`
	ClientSecret Credential `yaml:"client_secret" json:"client_secret"`
}

// TenantOAuth admits OAuth access tokens as a tenant: their tenant claim (auth.oauth's
// tenant_claim) must be one of Subjects, and they must carry every one of Scopes.
type TenantOAuth struct {
	Subjects []string `yaml:"subjects" json:"subjects"`
	Scopes   []string `yaml:"scopes" json:"scopes"`
}

// ServerApprovals configure what every agent's approvals share.
type ServerApprovals struct {
	// StateKey seals the requestState of an approval asked through input requests (MCP
	// 2026-07-28): 32 bytes, base64. A list [new, old] rotates: the first seals, all open.
	// Absent means a random key per process, so a retry survives no restart; replicas that
	// answer one another's retries need the same key.
	StateKey StateKeys `yaml:"state_key" json:"state_key,omitempty"`
	// OperatorTokens are the bearer tokens of the operator's route /v1/approvals on the
	// serving port, as HashToken stores them ("sha256:" + 64 lowercase hex); they admit
	// nothing else, and no tenant's token admits that route.
	OperatorTokens []string `yaml:"operator_tokens" json:"operator_tokens,omitempty"`
	// Webhook, when set, is told of each new pending approval: a POST of its JSON.
	Webhook *Webhook `yaml:"webhook" json:"webhook,omitempty"`
	// RetentionHours is how long the ledger keeps journals and pending states, and the
	// cassettes of recorded executions (cassettes.record); nil means DefaultRetentionHours.
	RetentionHours *float64 `yaml:"retention_hours" json:"retention_hours,omitempty"`
}

// Webhook is where a notice of each pending approval is POSTed, with an optional bearer token.
type Webhook struct {
	URL    string      `yaml:"url" json:"url"`
	Bearer *Credential `yaml:"bearer" json:"bearer,omitempty"`
}

// Cassettes is the top-level cassettes block: whether the server records each execution's
// binding calls in the ledger, so `mcp-sandbox export` can give its cassette (docs/design.md
// §17), and how much of a large result a cassette keeps. `run --record` keeps as much.
type Cassettes struct {
	// Record makes serve record every execution's cassette in the ledger, kept for
	// approvals.retention_hours.
	Record bool `yaml:"record" json:"record"`
	// KeptBytes is how much of a result kept under a handle a cassette holds, for a replay's
	// handle reads; a longer one is cut there, and its line says so. 0 keeps the handle alone:
	// the result stays by reference to the blob store. nil means DefaultCassetteKeptBytes.
	KeptBytes *ByteSize `yaml:"kept_bytes" json:"kept_bytes,omitempty"`
}

// StateKeys are one key reference, {env: NAME} or {file: PATH}, or a list of them.
type StateKeys []Credential

// Ledger selects a shared run ledger, for replicas on several machines.
type Ledger struct {
	Postgres *LedgerPostgres `yaml:"postgres" json:"postgres,omitempty"`
}

// LedgerPostgres is the run ledger on PostgreSQL.
type LedgerPostgres struct {
	// DSN is a reference to the connection string (a URL postgres://… or key=value pairs).
	DSN Credential `yaml:"dsn" json:"dsn"`
	// LeaseSeconds is how long a replica's lease lasts without renewal: a replica that dies
	// has the calls it left in flight recorded unknown by a survivor within about a lease and
	// a quarter (survivors look every quarter lease). nil means 30.
	LeaseSeconds *float64 `yaml:"lease_seconds" json:"lease_seconds,omitempty"`
}

// Blobs selects a shared blob store, for replicas on several machines.
type Blobs struct {
	Postgres *BlobsPostgres `yaml:"postgres" json:"postgres,omitempty"`
}

// BlobsPostgres is the blob store on PostgreSQL.
type BlobsPostgres struct {
	// DSN is a reference to the connection string, as for the ledger (often the same one).
	DSN Credential `yaml:"dsn" json:"dsn"`
}

// BlobStoreConfigured reports whether c has a blob store: a shared one, or a data dir.
func (c *Config) BlobStoreConfigured() bool {
	return c.Blobs != nil && c.Blobs.Postgres != nil || c.DataDir != NoDataDir
}

// SandboxService is the configuration of `mcp-sandbox sandbox-service`.
type SandboxService struct {
	// Tokens are the bearer tokens callers present, as HashToken stores them.
	Tokens []string `yaml:"tokens" json:"tokens"`
	// Profile names the profile whose backend and hard limits run the executions; it must be
	// a local one (default "default").
	Profile string `yaml:"profile" json:"profile"`
}

// Profile is a named backend with the deployment's caps on what runs under it.
type Profile struct {
	Backend   string `yaml:"backend" json:"backend"`     // local | process | namespaces | bwrap | container | remote
	Isolation string `yaml:"isolation" json:"isolation"` // the minimum this profile must reach
	// Python is the interpreter; "" means discovered, one the sandbox identity can execute.
	Python string `yaml:"python" json:"python"`
	// RunAs is "uid:gid", or a range "A-B" for a pool, used when started as root.
	RunAs        string   `yaml:"run_as" json:"run_as"`
	AllowSameUID bool     `yaml:"allow_same_uid" json:"allow_same_uid"`
	EnvAllowlist []string `yaml:"env_allowlist" json:"env_allowlist"`
	AllowNetwork bool     `yaml:"allow_network" json:"allow_network"`
	// Network, beside allow_network, lets agents ask for network: rules (docs/design.md §18).
	Network       *ProfileNetwork `yaml:"network" json:"network,omitempty"`
	HardLimits    Limits          `yaml:"hard_limits" json:"hard_limits"`
	BindingBudget BindingBudget   `yaml:"binding_budget" json:"binding_budget"`
	Output        OutputPolicy    `yaml:"output" json:"output"`
	Artifacts     ArtifactPolicy  `yaml:"artifacts" json:"artifacts"`
	// Images says which image artifacts come back to the model as images too.
	Images Images `yaml:"images" json:"images"`
	// Approvals says how long a call that needs a person's approval waits for the answer.
	Approvals Approvals `yaml:"approvals" json:"approvals"`
	// Warm sizes the pools of started, graded children kept ready, one pool per tenant and
	// terms; a remote profile's service sizes its own.
	Warm Warm `yaml:"warm" json:"warm"`
	// Remote is the sandbox service a `remote` profile runs its programs on; only that
	// backend has it.
	Remote *Remote `yaml:"remote" json:"remote,omitempty"`
	// Container configures backend container; only such a profile may carry it, and after
	// defaults every such profile does.
	Container *Container `yaml:"container" json:"container,omitempty"`
}

// Warm sizes a profile's warm pools: each keeps between Min and Max children started ahead of
// demand (growing towards Max while executions find it empty), and shrinks back to Min once
// unused for IdleSeconds. Min 0 and Max 0 keep none.
type Warm struct {
	Min         *int     `yaml:"min" json:"min"`
	Max         *int     `yaml:"max" json:"max"`
	IdleSeconds *float64 `yaml:"idle_seconds" json:"idle_seconds"`
	// Start is how the namespaces backend makes a warm pool's children: WarmStartAuto (the
	// default) and WarmStartTemplate fork each from a template kept per tenant and terms,
	// where the host allows it, and exec them otherwise (the log and doctor say why);
	// WarmStartExec forbids templates: each child is exec'd, with a fresh address layout and
	// hash key. Other backends always exec.
	Start *string `yaml:"start" json:"start"`
}

// Values of Warm.Start.
const (
	WarmStartAuto     = "auto"
	WarmStartExec     = "exec"
	WarmStartTemplate = "template"
)

// Remote is where a remote profile's sandbox service listens, and the credential it wants.
type Remote struct {
	URL    string      `yaml:"url" json:"url"`
	Bearer *Credential `yaml:"bearer" json:"bearer,omitempty"`
	// AllowInsecureHTTP permits the bearer over plaintext http:// to a non-loopback host.
	AllowInsecureHTTP bool `yaml:"allow_insecure_http" json:"allow_insecure_http"`
}

// Container is the container backend's block: the runtime's CLI, the image (never pulled),
// the interpreter inside it, and the OCI runtime.
type Container struct {
	// Runtime is docker, podman, or an absolute path to either; "" takes whichever answers.
	Runtime string `yaml:"runtime" json:"runtime"`
	// Image is a name[:tag] or a name@sha256:<digest>; default DefaultContainerImage.
	Image string `yaml:"image" json:"image"`
	// Python is the interpreter's absolute path inside the image; default DefaultContainerPython.
	Python string `yaml:"python" json:"python"`
	// OCIRuntime is handed to the runtime (runc, crun, runsc for gVisor, …); "" is its default.
	OCIRuntime string `yaml:"oci_runtime" json:"oci_runtime"`
}

// Limits are the resource dimensions of one execution. A nil field means "whatever the next
// layer allows": on a profile after defaults none is nil; in a policy or an agent's request
// any may be.
type Limits struct {
	CPUSeconds    *float64  `yaml:"cpu_seconds" json:"cpu_seconds"`
	WallSeconds   *float64  `yaml:"wall_seconds" json:"wall_seconds"`
	MemoryBytes   *ByteSize `yaml:"memory_bytes" json:"memory_bytes"`
	FileSizeBytes *ByteSize `yaml:"file_size_bytes" json:"file_size_bytes"`
	ProcessCount  *int      `yaml:"process_count" json:"process_count"`
}

// BindingBudget caps what a program's binding calls may cost the host, per execution and per
// Run (docs/design.md §6). A nil field means "whatever the next layer allows".
type BindingBudget struct {
	MaxCalls          *int      `yaml:"max_calls" json:"max_calls"`
	MaxTotalBytes     *ByteSize `yaml:"max_total_bytes" json:"max_total_bytes"`
	MaxProducedBytes  *ByteSize `yaml:"max_produced_bytes" json:"max_produced_bytes"`
	MaxPreservedBytes *ByteSize `yaml:"max_preserved_bytes" json:"max_preserved_bytes"`
	MaxArgumentBytes  *ByteSize `yaml:"max_argument_bytes" json:"max_argument_bytes"`
	MaxResultBytes    *ByteSize `yaml:"max_result_bytes" json:"max_result_bytes"`
}

// OutputPolicy says how much of each stream the model sees, how much is captured at all, and
// whether what was cut must be kept.
type OutputPolicy struct {
	PreviewBytes *ByteSize `yaml:"preview_bytes" json:"preview_bytes"` // per stream, what the model sees
	MaxBytes     *ByteSize `yaml:"max_bytes" json:"max_bytes"`         // per stream, what is captured
	Preserve     string    `yaml:"preserve" json:"preserve"`           // when_available | required
}

// ArtifactPolicy says whether files the program writes to its workspace come back.
type ArtifactPolicy struct {
	Collection string    `yaml:"collection" json:"collection"` // collect | ignore
	MaxFiles   *int      `yaml:"max_files" json:"max_files"`
	MaxBytes   *ByteSize `yaml:"max_bytes" json:"max_bytes"`
}

// Images says how image artifacts (PNG, JPEG, GIF, WebP, known by their first bytes) come
// back: one of at most InlineBytes as MCP ImageContent beside its handle; a larger one as its
// handle only. Zero sends none as an image.
type Images struct {
	InlineBytes *ByteSize `yaml:"inline_bytes" json:"inline_bytes"`
}

// Approvals configure the asking of a person about calls that need approval.
type Approvals struct {
	// TimeoutSeconds is how long a call waits for the answer; without one it is refused
	// (approval_required_in_program) and a program goes on. Inside a program the wait also ends
	// a second before the program's wall clock.
	TimeoutSeconds *float64 `yaml:"timeout_seconds" json:"timeout_seconds"`
	// PlanSeconds is how long a rehearsal's plan, once approved, lets the real run make the
	// calls it lists without asking again (docs/design.md §22).
	PlanSeconds *float64 `yaml:"plan_seconds" json:"plan_seconds"`
}

// UpstreamPaths are the host paths a contained upstream server may read, and those it may
// also write: absolute, each a file or directory that exists when the server starts.
type UpstreamPaths struct {
	ReadOnly  []string `yaml:"read_only" json:"read_only,omitempty"`
	ReadWrite []string `yaml:"read_write" json:"read_write,omitempty"`
}

// Upstream is a server this deployment is a client of: an MCP server (a command speaking stdio,
// or a URL speaking streamable HTTP) or an A2A peer. Exactly one of Command, URL and A2A is set.
type Upstream struct {
	// Command is argv. A relative command[0] containing a slash is resolved by Load against
	// the config file's directory; a bare name is looked up in PATH by whoever starts it.
	Command []string          `yaml:"command" json:"command,omitempty"`
	Env     map[string]string `yaml:"env" json:"env,omitempty"` // for a command; literal values
	// Sandbox names a profile whose backend runs Command contained, as it runs programs (its
	// hard limits but the CPU time, its network: none, or rules through the egress proxy);
	// "" runs it as a process of the host's own.
	Sandbox string `yaml:"sandbox" json:"sandbox,omitempty"`
	// Paths are host paths a contained server (Sandbox set) is given, bound into its root at
	// the same place; it sees no other file of the host's but the system's own.
	Paths  *UpstreamPaths `yaml:"paths" json:"paths,omitempty"`
	URL    string         `yaml:"url" json:"url,omitempty"`
	Bearer *Credential    `yaml:"bearer" json:"bearer,omitempty"` // for a URL
	// Deferred keeps the server's catalogue out of the prompt; its tools stay bindable.
	Deferred bool `yaml:"deferred" json:"deferred"`
	// AllowInsecureHTTP permits a bearer over plaintext http:// to a non-loopback host.
	AllowInsecureHTTP bool `yaml:"allow_insecure_http" json:"allow_insecure_http"`
	// A2A makes the upstream an A2A agent: its skills are its tools, "<upstream>__<skill id>".
	A2A *A2APeer `yaml:"a2a" json:"a2a,omitempty"`
	// OAuth has the server get access tokens for this url or a2a upstream by the
	// client-credentials grant, instead of a static bearer.
	OAuth *UpstreamOAuth `yaml:"oauth" json:"oauth,omitempty"`
}

// UpstreamOAuth is the client an upstream's access tokens are requested as (the
// client-credentials grant, RFC 6749 §4.4). Issuer empty: the authorization server is the
// first one the upstream's Protected Resource Metadata (RFC 9728) names, and the client secret
// goes to it; set Issuer to pin it. Resource empty: the resource that metadata names, else the
// upstream's URL (RFC 8707: the audience the token is asked for).
type UpstreamOAuth struct {
	Issuer       string     `yaml:"issuer" json:"issuer,omitempty"`
	ClientID     string     `yaml:"client_id" json:"client_id"`
	ClientSecret Credential `yaml:"client_secret" json:"client_secret"`
	Scopes       []string   `yaml:"scopes" json:"scopes,omitempty"`
	Resource     string     `yaml:"resource" json:"resource,omitempty"`
}

// A2APeer is an A2A agent reached over HTTP (JSON-RPC, A2A 0.3). Its Agent Card is read from
// URL's .well-known/agent-card.json (or from URL itself when it names the card), and every
// request the card leads to must stay on URL's scheme, host and port.
type A2APeer struct {
	URL    string      `yaml:"url" json:"url"`
	Bearer *Credential `yaml:"bearer" json:"bearer,omitempty"`
	// AllowInsecureHTTP permits a bearer over plaintext http:// to a non-loopback host.
	AllowInsecureHTTP bool `yaml:"allow_insecure_http" json:"allow_insecure_http"`
}

// Tenant is one customer of the deployment: who may connect, what it is granted, and its
// agents.
type Tenant struct {
	// Tokens are HTTP bearer tokens as HashToken stores them: "sha256:" + 64 lowercase hex.
	Tokens []string `yaml:"tokens" json:"tokens"`
	// OAuth admits access tokens from auth.oauth's issuers as this tenant.
	OAuth     *TenantOAuth     `yaml:"oauth" json:"oauth,omitempty"`
	Upstreams []string         `yaml:"upstreams" json:"upstreams"` // granted servers
	Policy    Policy           `yaml:"policy" json:"policy"`
	Agents    map[string]Agent `yaml:"agents" json:"agents"`
}

// Policy narrows what a tenant's agents may do. It can only narrow.
type Policy struct {
	// Deny and ApprovalRequired are globs (path.Match syntax: * ? [...] \\) over upstream
	// tools' model-facing names; "*" matches any run of characters. They apply to upstream
	// tools only: an entry naming a built-in (run_code, list_tools, ...) is rejected.
	Deny             []string `yaml:"deny" json:"deny"`
	ApprovalRequired []string `yaml:"approval_required" json:"approval_required"`
	// DestructiveNeedsApproval false means an upstream's destructiveHint alone does not make
	// a tool need approval (approval_required and rules still do); nil means true.
	DestructiveNeedsApproval *bool `yaml:"destructive_needs_approval" json:"destructive_needs_approval,omitempty"`
	// Rules match a call's arguments, not only its tool's name: see Rule.
	Rules         []Rule        `yaml:"rules" json:"rules,omitempty"`
	BindingBudget BindingBudget `yaml:"binding_budget" json:"binding_budget"`
	Limits        Limits        `yaml:"limits" json:"limits"`
	// AllowNetwork false withdraws network from every agent of the tenant; nil leaves it to
	// the profile and the agent.
	AllowNetwork *bool `yaml:"allow_network" json:"allow_network"`
	// Quotas bound what the tenant holds at once (concurrent executions and how long one
	// waits for a slot, sessions, stored bytes); Config.TenantQuotas fills the defaults. They
	// are the host's capacity, not the agent's definition: AgentVersion leaves them out.
	Quotas TenantQuotas `yaml:"quotas" json:"quotas,omitzero"`
}

// Rule is an argument rule of a tenant's policy: for a call of a tool matching Tool, the value
// at Argument must be one of Allow, or match Pattern whole; otherwise the call is denied
// ("deny") or needs a person's approval ("approval_required"). Values are compared as text:
// a string as it is, a number as written, a boolean as true or false; an array is allowed
// when it is not empty and every element is; an absent value, null, an object or an empty
// array is never allowed. Rules only add
// refusals and approvals: a value a rule allows is still denied or asked about by the rest of
// the policy.
type Rule struct {
	// Tool is a glob over upstream tools' model-facing names, as in deny.
	Tool string `yaml:"tool" json:"tool"`
	// Argument is a path into the arguments: object keys joined by ".", e.g. repo or
	// target.owner.
	Argument string `yaml:"argument" json:"argument"`
	// Allow lists the allowed values; Pattern is an RE2 regular expression the whole value
	// must match. Exactly one of them is given.
	Allow   []string `yaml:"allow" json:"allow,omitempty"`
	Pattern string   `yaml:"pattern" json:"pattern,omitempty"`
	// Otherwise is deny or approval_required.
	Otherwise string `yaml:"otherwise" json:"otherwise"`
}

// What a rule does to a value it does not allow.
const (
	RuleDeny             = "deny"
	RuleApprovalRequired = "approval_required"
)

// Agent is what one MCP session of a tenant is offered.
type Agent struct {
	// ExposeUpstreamTools offers granted, non-deferred upstream tools directly too.
	ExposeUpstreamTools bool `yaml:"expose_upstream_tools" json:"expose_upstream_tools"`
	// CodeExecution nil means run_code is never shown.
	CodeExecution *CodeExecution `yaml:"code_execution" json:"code_execution"`
	// Programs is how the agent is offered its tenant's saved programs (docs/design.md §23);
	// nil means under the prefix "saved", without the save_program built-in.
	Programs *AgentPrograms `yaml:"programs" json:"programs,omitempty"`
}

// AgentPrograms configure an agent's saved programs: the prefix of their tool names
// (`<prefix>__<name>`, default "saved"), and whether the model may propose saving one through
// the save_program built-in, which a person (or an operator) must accept.
type AgentPrograms struct {
	Prefix  string `yaml:"prefix" json:"prefix,omitempty"`
	Propose bool   `yaml:"propose" json:"propose,omitempty"`
}

// CodeExecution is an agent's opt-in to run_code and the terms it asks for. Every field is a
// request that the profile's hard limits and the tenant policy may narrow.
type CodeExecution struct {
	Profile   string `yaml:"profile" json:"profile"`     // default "default"
	Isolation string `yaml:"isolation" json:"isolation"` // process | isolated; default process
	// Bindings nil means every tool currently callable; a list narrows that set. Entries are
	// built-ins or "<upstream>__<tool>" or "<upstream>__*".
	Bindings *[]string `yaml:"bindings" json:"bindings"`
	Limits   Limits    `yaml:"limits" json:"limits"`
	Network  string    `yaml:"network" json:"network"` // none | rules | unrestricted; default none
}

//go:embed default.yaml
var defaultYAML []byte

// DefaultYAML returns the text of the embedded default.yaml: the configuration `serve` uses
// with no --config. The slice is a fresh copy.
func DefaultYAML() []byte { return append([]byte(nil), defaultYAML...) }

// Default returns the parsed embedded default.yaml: profile "default", no upstreams, tenant
// "local" with agent "default" opted in to code execution. Each call returns a fresh value.
// It parses the file without its comment lines, which are most of its bytes and most of what
// parsing it cost every command's start (docs/design.md §19.10); default.yaml has no block
// scalar whose lines they could be, and TestDefaultYAML pins that both parse alike.
func Default() *Config {
	c, err := Parse(uncommented(defaultYAML), "default.yaml")
	if err != nil {
		// default_test.go pins that this cannot happen.
		panic("configs: embedded default.yaml is invalid: " + err.Error())
	}
	return c
}

// uncommented is doc without its whole-line comments.
func uncommented(doc []byte) []byte {
	out := make([]byte, 0, len(doc)/4)
	for line := range bytes.Lines(doc) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out = append(out, line...)
		}
	}
	return out
}

// Profile returns the profile registered under name, with defaults filled, counting a
// hand-built Config's Sandbox as "default".
func (c *Config) Profile(name string) (Profile, bool) {
	if p, ok := c.Profiles[name]; ok {
		return withProfileDefaults(p), true
	}
	if name == DefaultProfileName && c.Sandbox != nil {
		return withProfileDefaults(*c.Sandbox), true
	}
	return Profile{}, false
}
