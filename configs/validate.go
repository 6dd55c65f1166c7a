package configs

import (
	"fmt"

	"github.com/mcp-sandbox/mcp-sandbox/egress"
	"maps"
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// The patterns are compiled on first use, not at package init: every start of the binary runs
// the initialisers, the init helper's (twice per sandbox child) included, and name's alone
// costs about a third of a millisecond.
var (
	// upstreamName: lowercase words joined by single '-' or '_', so "__" never occurs in one
	// and "<upstream>__<tool>" splits unambiguously at the first "__".
	upstreamName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]+(?:[-_][a-z0-9]+)*$`) })
	// name is for profiles, tenants and agents: they appear in flags, file names
	// (tenants_dir) and records, so they are kept to a safe alphabet.
	name       = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,62}[A-Za-z0-9])?$`) })
	envName    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })
	tokenHash  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^sha256:[0-9a-f]{64}$`) })
	runAsPair  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([0-9]+):([0-9]+)$`) })
	runAsRange = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([0-9]+)-([0-9]+)$`) })
	// imageRef: [registry[:port]/]path[:tag][@sha256:digest], the path in lowercase
	// components joined by '/', each words separated by '.', '_', '__' or dashes.
	imageRef = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?` +
			`[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*` +
			`(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?$`)
	})
	ociRuntimeName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`) })
)

const nameRule = "use letters, digits, '.', '_' and '-', starting and ending with a letter or digit, at most 64 characters"

var (
	backends   = []string{BackendLocal, BackendProcess, BackendNamespaces, BackendBwrap, BackendContainer, BackendRemote}
	isolations = []string{IsolationProcess, IsolationIsolated}
	preserves  = []string{PreserveWhenAvailable, PreserveRequired}
	collects   = []string{CollectionCollect, CollectionIgnore}
	networks   = []string{NetworkNone, NetworkRules, NetworkUnrestricted}
	builtins   = []string{ToolListTools, ToolGetToolInfo, ToolReadToolOutput}
)

// Validate reports every problem with c, each naming its key path, sorted by path; this is
// what `mcp-sandbox check` prints. Fields left at their zero value are validated as their
// defaults. Parse and Load have already called it (with file and line positions).
func (c *Config) Validate() error {
	m := &meta{defaultFromSandbox: c.Sandbox != nil}
	var ps Problems
	if _, ok := c.Profiles[DefaultProfileName]; ok && c.Sandbox != nil {
		ps = append(ps, m.problem("sandbox", "conflicts with profiles.%s: the sandbox block is the profile named %q; keep one", DefaultProfileName, DefaultProfileName))
		m.defaultFromSandbox = false
	}
	ps = append(ps, validate(c.withDefaults(), m)...)
	return ps.asError("")
}

type validator struct {
	c  *Config
	m  *meta
	ps Problems
}

func (v *validator) add(path, format string, args ...any) {
	v.ps = append(v.ps, v.m.problem(path, format, args...))
}

// validate checks c, which has its defaults filled.
func validate(c *Config, m *meta) Problems {
	v := &validator{c: c, m: m}
	for _, n := range slices.Sorted(maps.Keys(c.Profiles)) {
		v.profile(n, c.Profiles[n])
	}
	for _, n := range slices.Sorted(maps.Keys(c.Upstreams)) {
		v.upstream(n, c.Upstreams[n])
	}
	v.storage()
	v.serverQuotas(c.Quotas)
	for i, k := range c.Approvals.StateKey {
		v.credential(fmt.Sprintf("approvals.state_key[%d]", i), k)
	}
	for i, h := range c.Approvals.OperatorTokens {
		if !tokenHash().MatchString(h) {
			v.add(fmt.Sprintf("approvals.operator_tokens[%d]", i), `must be "sha256:" and 64 lowercase hex digits (printf %%s "$TOKEN" | sha256sum), never the token itself`)
		}
		for _, tn := range slices.Sorted(maps.Keys(c.Tenants)) {
			if slices.Contains(c.Tenants[tn].Tokens, h) {
				v.add(fmt.Sprintf("approvals.operator_tokens[%d]", i), "is also tenant %s's token; an operator's token must be its own", tn)
			}
		}
	}
	if w := c.Approvals.Webhook; w != nil {
		if u, err := url.Parse(w.URL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			v.add("approvals.webhook.url", "must be an http:// or https:// URL, not %q", w.URL)
		}
		if w.Bearer != nil {
			v.credential("approvals.webhook.bearer", *w.Bearer)
		}
	}
	if r := c.Approvals.RetentionHours; r != nil && (*r <= 0 || *r > 24*366*10) {
		v.add("approvals.retention_hours", "%g is outside (0, 87840]: journals and cassettes are kept at least a moment and at most ten years", *r)
	}
	if b := c.Cassettes.KeptBytes; b != nil && (*b < 0 || *b > MaxCassetteKeptBytes) {
		v.add("cassettes.kept_bytes", "%v is outside 0 to %v", *b, ByteSize(MaxCassetteKeptBytes))
	}
	if len(c.Tenants) == 0 && c.TenantsDir == "" && c.SandboxService == nil {
		v.add("tenants", "no tenant is defined; define one here or set tenants_dir")
	}
	if c.SandboxService != nil {
		v.sandboxService(*c.SandboxService)
	}
	tokens := map[string]string{}
	for _, n := range slices.Sorted(maps.Keys(c.Tenants)) {
		v.tenant(n, c.Tenants[n], tokens)
	}
	v.oauth()
	v.egress()
	return v.ps
}

// egress parses the server-wide rules and refuses every upstream URL they would refuse: an
// operator pinned where the server may connect, so such an upstream is never connected to.
func (v *validator) egress() {
	if v.c.Egress == nil {
		return
	}
	rs, ok := v.ruleList("egress", v.c.Egress.Allow, v.c.Egress.Deny)
	if !ok {
		return
	}
	for _, n := range slices.Sorted(maps.Keys(v.c.Upstreams)) {
		u := v.c.Upstreams[n]
		at, raw := keyPath("upstreams", n)+".url", u.URL
		if u.A2A != nil {
			at, raw = keyPath("upstreams", n)+".a2a.url", u.A2A.URL
		}
		if raw == "" {
			continue
		}
		if d := rs.URL(raw); !d.Allowed() {
			why := "no egress.allow rule names it"
			if d.Reason == egress.ReasonDenied {
				why = fmt.Sprintf("egress.deny rule %q refuses it", d.Rule)
			}
			v.add(at, "the server-wide egress rules refuse %s (%s): %s; it would never be connected to", redactURL(raw), d.Reason, why)
		}
	}
}

// ruleList parses allow and deny lists at at, reporting each bad rule.
func (v *validator) ruleList(at string, allow, deny []string) (*egress.Rules, bool) {
	good := true
	for key, list := range map[string][]string{"allow": allow, "deny": deny} {
		for i, s := range list {
			if _, err := egress.ParseRule(s); err != nil {
				v.add(indexPath(at+"."+key, i), "%v", err)
				good = false
			}
		}
	}
	if !good {
		return nil, false
	}
	rs, err := egress.ParseRules(allow, deny)
	return rs, err == nil
}

// network checks a profile's network block.
func (v *validator) network(at string, n *ProfileNetwork) {
	at += ".network"
	v.ruleList(at, n.Allow, n.Deny)
	if len(n.Allow) == 0 {
		v.add(at+".allow", "network rules with nothing allowed; use allow_network: false instead, or list what may be reached")
	}
	for i, c := range n.Credentials {
		p := indexPath(at+".credentials", i)
		if _, err := egress.ParseRule(c.Host); err != nil || strings.ContainsAny(c.Host, ":/") {
			v.add(p+".host", "%q is not a host name or *.suffix", c.Host)
		}
		if !httpToken(c.Header) {
			v.add(p+".header", "%q is not an HTTP header name", c.Header)
		}
		v.credential(p+".value", c.Value)
	}
	if n.MaxBytes != nil {
		v.positive(at+".max_bytes", n.MaxBytes)
	}
}

func httpToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c <= ' ' || c >= 0x7f || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", c) {
			return false
		}
	}
	return true
}

// redactURL drops a URL's user information and query, which may carry secrets.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "the upstream's URL"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

func oneOf(s string, allowed []string) bool { return slices.Contains(allowed, s) }

func (v *validator) enum(path, what, got string, allowed []string) {
	if !oneOf(got, allowed) {
		v.add(path, "unknown %s %q (one of %s)", what, got, strings.Join(allowed, ", "))
	}
}

func (v *validator) profilePath(n string) string {
	if n == DefaultProfileName && v.m.defaultFromSandbox {
		return "sandbox"
	}
	return keyPath("profiles", n)
}

func (v *validator) profile(n string, p Profile) {
	at := v.profilePath(n)
	if !name().MatchString(n) {
		v.add(at, "invalid profile name %q: %s", n, nameRule)
	}
	v.enum(at+".backend", "backend", p.Backend, backends)
	if built := v.m.backends; built != nil && oneOf(p.Backend, backends) && !oneOf(p.Backend, built) {
		v.add(at+".backend", "backend %q is not in this build of mcp-sandbox (it has %s)", p.Backend, strings.Join(built, ", "))
	}
	v.enum(at+".isolation", "isolation", p.Isolation, isolations)
	if p.Backend == BackendProcess && p.Isolation == IsolationIsolated {
		v.add(at+".isolation", "backend %q cannot reach isolation %q: it has no kernel boundary (use local, namespaces, bwrap, container or remote)", BackendProcess, IsolationIsolated)
	}
	v.runAs(at+".run_as", p.RunAs)
	for i, e := range p.EnvAllowlist {
		if !envName().MatchString(e) {
			v.add(indexPath(at+".env_allowlist", i), "%q is not an environment variable name", e)
		}
	}
	v.limits(at+".hard_limits", p.HardLimits)
	if p.Network != nil {
		v.network(at, p.Network)
	}
	v.budget(at+".binding_budget", p.BindingBudget)

	o := p.Output
	v.positive(at+".output.preview_bytes", o.PreviewBytes)
	v.positive(at+".output.max_bytes", o.MaxBytes)
	if o.PreviewBytes != nil && o.MaxBytes != nil && *o.MaxBytes > 0 && *o.PreviewBytes > *o.MaxBytes {
		v.add(at+".output.preview_bytes", "%d is more than output.max_bytes (%d): a preview cannot show more than was captured", *o.PreviewBytes, *o.MaxBytes)
	}
	v.enum(at+".output.preserve", "preserve", o.Preserve, preserves)
	if o.Preserve == PreserveRequired && !v.c.BlobStoreConfigured() {
		v.add(at+".output.preserve", "%q needs a blob store, and data_dir %q means there is none", PreserveRequired, NoDataDir)
	}

	v.positive(at+".approvals.timeout_seconds", p.Approvals.TimeoutSeconds)
	v.positive(at+".approvals.plan_seconds", p.Approvals.PlanSeconds)
	if s := p.Approvals.PlanSeconds; s != nil && *s > maxApprovalSeconds {
		v.add(at+".approvals.plan_seconds", "%g is more than a day (%d seconds); an approved plan would cover calls that long", *s, maxApprovalSeconds)
	}
	if s := p.Approvals.TimeoutSeconds; s != nil && *s > maxApprovalSeconds {
		v.add(at+".approvals.timeout_seconds", "%g is more than a day (%d seconds); a call would hold its program and its host that long", *s, maxApprovalSeconds)
	}

	a := p.Artifacts
	v.enum(at+".artifacts.collection", "collection", a.Collection, collects)
	v.positive(at+".artifacts.max_files", a.MaxFiles)
	v.positive(at+".artifacts.max_bytes", a.MaxBytes)
	if n := p.Images.InlineBytes; n != nil && *n < 0 {
		v.add(at+".images.inline_bytes", "%d is negative; 0 sends no image inline", *n)
	}
	v.warm(at+".warm", p.Warm)
	v.remote(at, p)
	v.container(at, p)
}

// maxWarm bounds a warm pool: each child is a started interpreter holding its memory.
const maxWarm = 64

func (v *validator) warm(at string, w Warm) {
	for _, f := range []struct {
		key string
		n   *int
	}{{"min", w.Min}, {"max", w.Max}} {
		if f.n != nil && (*f.n < 0 || *f.n > maxWarm) {
			v.add(at+"."+f.key, "must be from 0 to %d, got %d", maxWarm, *f.n)
		}
	}
	if w.Min != nil && w.Max != nil && *w.Max < *w.Min {
		v.add(at+".max", "%d is less than warm.min (%d)", *w.Max, *w.Min)
	}
	v.positive(at+".idle_seconds", w.IdleSeconds)
	if w.Start != nil {
		v.enum(at+".start", "warm start", *w.Start, []string{WarmStartAuto, WarmStartExec, WarmStartTemplate})
	}
}

// remote checks a profile's remote block: present exactly for backend remote, with a service
// URL and credential checked as an upstream's are. What only a local backend uses is refused
// on a remote profile, because the service's own profile decides it.
func (v *validator) remote(at string, p Profile) {
	if p.Backend != BackendRemote {
		if p.Remote != nil {
			v.add(at+".remote", "applies only to backend %q", BackendRemote)
		}
		return
	}
	if p.Remote == nil {
		v.add(at+".remote", "backend %q needs a remote block: {url: \"https://host:port\", bearer: {env: NAME}}", BackendRemote)
	} else {
		r := p.Remote
		if r.Bearer != nil {
			v.credential(at+".remote.bearer", *r.Bearer)
		}
		if r.URL == "" {
			v.add(at+".remote.url", "the sandbox service's URL is required")
		} else {
			v.serviceURL(at+".remote", r.URL, r.Bearer, r.AllowInsecureHTTP)
		}
	}
	local := "applies to local backends; a remote profile runs on the sandbox service's own profile"
	if p.Python != "" {
		v.add(at+".python", "%s", local)
	}
	if len(p.EnvAllowlist) > 0 {
		v.add(at+".env_allowlist", "%s", local)
	}
	if p.AllowSameUID {
		v.add(at+".allow_same_uid", "%s", local)
	}
}

// sandboxService checks the sandbox_service block: hashed tokens, and a local profile.
func (v *validator) sandboxService(s SandboxService) {
	const at = "sandbox_service"
	seen := map[string]bool{}
	for i, tok := range s.Tokens {
		p := indexPath(at+".tokens", i)
		switch {
		case !tokenHash().MatchString(tok):
			// The value is not quoted: someone may have pasted the token itself.
			v.add(p, `must be "sha256:" followed by 64 lowercase hex digits (the SHA-256 of the token, never the token)`)
		case seen[tok]:
			v.add(p, "token listed twice")
		}
		seen[tok] = true
	}
	name := s.Profile
	if name == "" {
		name = DefaultProfileName
	}
	switch p, ok := v.c.Profiles[name]; {
	case !ok:
		v.add(at+".profile", "unknown profile %q (defined: %s)", name, list(slices.Sorted(maps.Keys(v.c.Profiles))))
	case p.Backend == BackendRemote:
		v.add(at+".profile", "profile %q is remote; a sandbox service runs programs on a local backend", name)
	}
}

// container checks the container block: present only on a container profile, or a local one
// (on macOS and Windows local takes the container backend where an engine answers; on Linux
// it never does, and the block is unused there), and nothing in it the runtime would have to
// guess at.
func (v *validator) container(at string, p Profile) {
	c := p.Container
	if p.Backend != BackendContainer && p.Backend != BackendLocal {
		if c != nil {
			v.add(at+".container", "applies only to backend %q, and to %q, which takes it on macOS and Windows (this profile's backend is %q)",
				BackendContainer, BackendLocal, p.Backend)
		}
		return
	}
	if c == nil {
		return
	}
	if p.Backend == BackendContainer && p.Python != "" {
		v.add(at+".python", "is the host's interpreter, which a container does not run; set container.python, the interpreter's path inside the image")
	}
	at += ".container"
	if rt := c.Runtime; rt != "" && rt != "docker" && rt != "podman" && !runtimePath(rt) {
		v.add(at+".runtime", "unknown runtime %q (docker, podman, or an absolute path to either, docker.exe or podman.exe on Windows; empty takes whichever answers)", rt)
	}
	if len(c.Image) > 255 || !imageRef().MatchString(c.Image) {
		v.add(at+".image", "%q is not an image reference (name[:tag] or name@sha256:<64 hex digits>, the name in lowercase, e.g. %s)", c.Image, DefaultContainerImage)
	}
	if !path.IsAbs(c.Python) || path.Clean(c.Python) != c.Python || strings.ContainsAny(c.Python, " \t\n\r,") {
		v.add(at+".python", "%q is not an absolute, clean path inside the image (e.g. %s)", c.Python, DefaultContainerPython)
	}
	if o := c.OCIRuntime; o != "" && !ociRuntimeName().MatchString(o) && !(path.IsAbs(o) && path.Clean(o) == o) {
		v.add(at+".oci_runtime", "%q is neither an OCI runtime's name (runc, crun, runsc) nor an absolute path to one", o)
	}
}

// runtimePath reports whether rt is an absolute, clean path to docker or podman: a POSIX one,
// or a Windows one (C:\...\docker.exe).
func runtimePath(rt string) bool {
	base := rt[strings.LastIndexAny(rt, `/\`)+1:]
	switch {
	case path.IsAbs(rt) && path.Clean(rt) == rt:
		return base == "docker" || base == "podman"
	case len(rt) > 3 && rt[1] == ':' && rt[2] == '\\' && !strings.Contains(rt, `\\`) && !strings.Contains(rt, "/"):
		base = strings.ToLower(base)
		return base == "docker.exe" || base == "podman.exe"
	}
	return false
}

func (v *validator) runAs(at, s string) {
	const want = `want "uid:gid" or a range "first-last"`
	parse := func(d string) (uint64, bool) {
		n, err := strconv.ParseUint(d, 10, 32)
		return n, err == nil && n < 1<<32-1 // 4294967295 is (uid_t)-1, "no change"
	}
	if m := runAsPair().FindStringSubmatch(s); m != nil {
		_, ok1 := parse(m[1])
		_, ok2 := parse(m[2])
		if !ok1 || !ok2 {
			v.add(at, "%q: id out of range (0 to 4294967294)", s)
		}
		return
	}
	if m := runAsRange().FindStringSubmatch(s); m != nil {
		lo, ok1 := parse(m[1])
		hi, ok2 := parse(m[2])
		switch {
		case !ok1 || !ok2:
			v.add(at, "%q: id out of range (0 to 4294967294)", s)
		case lo > hi:
			v.add(at, "%q: range starts after it ends", s)
		}
		return
	}
	v.add(at, "%q is not an identity: %s", s, want)
}

// positive checks an optional count or size: absent is fine, present must be above zero.
func (v *validator) positive(at string, p any) {
	switch p := p.(type) {
	case *int:
		if p != nil && *p <= 0 {
			v.add(at, "must be positive, got %d", *p)
		}
	case *ByteSize:
		if p != nil && *p <= 0 {
			v.add(at, "must be positive, got %d", *p)
		}
	case *float64:
		if p != nil && !finitePositive(*p) {
			v.add(at, "must be a positive number of seconds, got %v", *p)
		}
	default:
		panic(fmt.Sprintf("configs: positive: %T", p))
	}
}

func (v *validator) limits(at string, l Limits) {
	v.positive(at+".cpu_seconds", l.CPUSeconds)
	v.positive(at+".wall_seconds", l.WallSeconds)
	v.positive(at+".memory_bytes", l.MemoryBytes)
	v.positive(at+".file_size_bytes", l.FileSizeBytes)
	v.positive(at+".process_count", l.ProcessCount)
}

func (v *validator) budget(at string, b BindingBudget) {
	v.positive(at+".max_calls", b.MaxCalls)
	v.positive(at+".max_total_bytes", b.MaxTotalBytes)
	v.positive(at+".max_produced_bytes", b.MaxProducedBytes)
	v.positive(at+".max_preserved_bytes", b.MaxPreservedBytes)
	v.positive(at+".max_argument_bytes", b.MaxArgumentBytes)
	v.positive(at+".max_result_bytes", b.MaxResultBytes)
}

func (v *validator) upstream(n string, u Upstream) {
	at := keyPath("upstreams", n)
	if !upstreamName().MatchString(n) {
		v.add(at, "invalid upstream name %q: use lowercase letters and digits, words joined by a single '-' or '_' (tool names are <upstream>__<tool>, so an upstream name never contains \"__\")", n)
	}
	hasCmd, hasURL, hasA2A := len(u.Command) > 0, u.URL != "", u.A2A != nil
	var kinds []string
	for _, k := range []struct {
		set  bool
		name string
	}{{hasCmd, "command"}, {hasURL, "url"}, {hasA2A, "a2a"}} {
		if k.set {
			kinds = append(kinds, k.name)
		}
	}
	switch len(kinds) {
	case 0:
		v.add(at, "exactly one of command, url or a2a is required")
	case 1:
	default:
		v.add(at, "%s are both set; an upstream is one of command, url or a2a", strings.Join(kinds, " and "))
	}
	if hasCmd && u.Command[0] == "" {
		v.add(at+".command[0]", "the program must not be empty")
	}
	for _, k := range slices.Sorted(maps.Keys(u.Env)) {
		if !envName().MatchString(k) {
			v.add(keyPath(at+".env", k), "%q is not an environment variable name", k)
		}
	}
	if u.Sandbox != "" {
		switch p, ok := v.c.Profiles[u.Sandbox]; {
		case !hasCmd:
			v.add(at+".sandbox", "applies only to a command upstream")
		case !ok:
			v.add(at+".sandbox", "unknown profile %q (defined: %s)", u.Sandbox, list(slices.Sorted(maps.Keys(v.c.Profiles))))
		case p.Backend == BackendRemote || p.Backend == BackendContainer || p.Backend == BackendProcess:
			v.add(at+".sandbox", "profile %q's backend %s cannot run a server contained; use namespaces or bwrap (or local reaching one)", u.Sandbox, p.Backend)
		}
	}
	if u.Paths != nil {
		if u.Sandbox == "" {
			v.add(at+".paths", "applies only to a contained upstream (sandbox: PROFILE); an unconfined one reaches every file its user can")
		}
		v.upstreamPaths(at+".paths", u.Paths)
	}
	if len(u.Env) > 0 && !hasCmd {
		v.add(at+".env", "applies only to a command upstream")
	}
	if u.Bearer != nil {
		v.credential(at+".bearer", *u.Bearer)
		if !hasURL {
			v.add(at+".bearer", "applies only to a url upstream (an a2a peer's goes under a2a)")
		}
	}
	if u.AllowInsecureHTTP && !hasURL {
		v.add(at+".allow_insecure_http", "applies only to a url upstream (an a2a peer's goes under a2a)")
	}
	if hasURL {
		v.serviceURL(at, u.URL, u.Bearer, u.AllowInsecureHTTP)
	}
	if hasA2A {
		a := at + ".a2a"
		switch {
		case u.A2A.URL == "":
			v.add(a+".url", "the peer's URL is required (its agent card is read from .well-known/agent-card.json below it)")
		default:
			v.serviceURL(a, u.A2A.URL, u.A2A.Bearer, u.A2A.AllowInsecureHTTP)
		}
		if u.A2A.Bearer != nil {
			v.credential(a+".bearer", *u.A2A.Bearer)
		}
	}
	if u.OAuth != nil {
		v.upstreamOAuth(at, u)
	}
}

// upstreamOAuth checks an upstream's oauth block: a url or a2a upstream without a static
// bearer, a client id and secret reference, and an issuer and resource, when given, that are
// absolute URLs a secret may be sent to.
func (v *validator) upstreamOAuth(at string, u Upstream) {
	o, p := u.OAuth, at+".oauth"
	switch {
	case len(u.Command) > 0:
		v.add(p, "applies only to a url or a2a upstream (a command upstream is not reached over HTTP)")
	case u.Bearer != nil || (u.A2A != nil && u.A2A.Bearer != nil):
		v.add(p, "oauth and bearer are both set; an upstream gets its credential one way")
	}
	if o.ClientID == "" {
		v.add(p+".client_id", "required: the client the authorization server registered for this server")
	}
	v.credential(p+".client_secret", o.ClientSecret)
	if o.Issuer != "" {
		v.oauthURL(p+".issuer", o.Issuer)
	}
	if o.Resource != "" {
		if r, err := url.Parse(o.Resource); err != nil || r.Host == "" || (r.Scheme != "https" && r.Scheme != "http") || r.Fragment != "" {
			v.add(p+".resource", "must be an absolute http or https URL without a fragment (RFC 8707)")
		}
	}
	for i, s := range o.Scopes {
		if s == "" || strings.ContainsAny(s, " \t\n\"\\") {
			v.add(fmt.Sprintf("%s.scopes[%d]", p, i), "a scope is a non-empty token without spaces or quotes")
		}
	}
	insecure, raw := u.AllowInsecureHTTP, u.URL
	if u.A2A != nil {
		insecure, raw = u.A2A.AllowInsecureHTTP, u.A2A.URL
	}
	if e, err := url.Parse(raw); err == nil && e.Scheme == "http" && !insecure && !loopback(e.Hostname()) {
		v.add(p, "an access token is refused over plaintext http to a non-loopback host; use https, or set allow_insecure_http: true if the network in between is trusted")
	}
}

// credential checks a reference to a secret: exactly one of env and file.
func (v *validator) credential(at string, b Credential) {
	switch {
	case b.Env != "" && b.File != "":
		v.add(at, "set exactly one of env or file")
	case b.Env == "" && b.File == "":
		v.add(at, "set exactly one of env or file")
	case b.Env != "" && !envName().MatchString(b.Env):
		v.add(at+".env", "%q is not an environment variable name", b.Env)
	}
}

// serviceURL checks the URL of a service this deployment is a client of (an upstream, a
// sandbox service) with its credential, without ever quoting it: a URL may carry a secret in
// its query.
func (v *validator) serviceURL(at, raw string, bearer *Credential, allowInsecure bool) {
	p, err := url.Parse(raw)
	switch {
	case err != nil:
		v.add(at+".url", "not a valid URL")
		return
	case p.Scheme != "http" && p.Scheme != "https":
		v.add(at+".url", "the scheme must be http or https")
		return
	case p.Host == "":
		v.add(at+".url", "the URL has no host")
		return
	case p.User != nil:
		v.add(at+".url", "the URL carries credentials; put them in bearer (a reference) instead")
		return
	}
	if p.Scheme == "http" && bearer != nil && !allowInsecure && !loopback(p.Hostname()) {
		v.add(at+".bearer", "a credential is refused over plaintext http to a non-loopback host; use https, or set allow_insecure_http: true if the network in between is trusted")
	}
}

func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (v *validator) tenant(n string, t Tenant, tokens map[string]string) {
	at := keyPath("tenants", n)
	if !name().MatchString(n) {
		v.add(at, "invalid tenant name %q: %s", n, nameRule)
	}
	for i, tok := range t.Tokens {
		p := indexPath(at+".tokens", i)
		if !tokenHash().MatchString(tok) {
			// The value is not quoted: someone may have pasted the token itself.
			v.add(p, `must be "sha256:" followed by 64 lowercase hex digits (the SHA-256 of the token, never the token)`)
			continue
		}
		if first, dup := tokens[tok]; dup {
			v.add(p, "token already given at %s; a token identifies exactly one tenant", first)
			continue
		}
		tokens[tok] = p
	}
	granted := map[string]bool{}
	for i, u := range t.Upstreams {
		p := indexPath(at+".upstreams", i)
		switch _, ok := v.c.Upstreams[u]; {
		case !ok:
			v.add(p, "unknown upstream %q (defined: %s)", u, list(slices.Sorted(maps.Keys(v.c.Upstreams))))
		case granted[u]:
			v.add(p, "upstream %q is granted twice", u)
		}
		granted[u] = true
	}
	v.patterns(at+".policy.deny", t.Policy.Deny)
	v.patterns(at+".policy.approval_required", t.Policy.ApprovalRequired)
	v.rules(at+".policy.rules", t.Policy.Rules)
	v.budget(at+".policy.binding_budget", t.Policy.BindingBudget)
	v.limits(at+".policy.limits", t.Policy.Limits)
	v.tenantQuotas(at, t.Policy.Quotas)

	if len(t.Agents) == 0 {
		v.add(at+".agents", "no agent is defined; a session must name one")
	}
	for _, an := range slices.Sorted(maps.Keys(t.Agents)) {
		v.agent(n, t, at, an, t.Agents[an])
	}
}

func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// patterns checks tool-name globs. Beyond syntax, a literal part that can never match a
// tool is an error: a misspelt deny entry would otherwise deny nothing, silently.
func (v *validator) patterns(at string, ps []string) {
	for i, p := range ps {
		v.pattern(indexPath(at, i), p)
	}
}

func (v *validator) pattern(pp, p string) {
	if _, err := path.Match(p, ""); err != nil || p == "" {
		v.add(pp, "invalid pattern %q (a glob: * ? [...])", p)
		return
	}
	up, _, scoped := strings.Cut(p, "__")
	switch {
	case scoped && !strings.ContainsAny(up, `*?[\`):
		if _, ok := v.c.Upstreams[up]; !ok {
			v.add(pp, "pattern %q names unknown upstream %q (defined: %s)", p, up, list(slices.Sorted(maps.Keys(v.c.Upstreams))))
		}
	case !scoped && (p == ToolRunCode || oneOf(p, builtins)):
		// Policy narrows upstream tools only: run_code is never callable from a program,
		// and the built-ins answer from the already narrowed catalogue, so an entry naming
		// one would look like a restriction and enforce nothing.
		v.add(pp, "pattern %q names a built-in tool; deny, approval_required and rules apply to upstream tools (<upstream>__<tool>) only", p)
	case !scoped && !strings.ContainsAny(p, `*?[\`):
		v.add(pp, "pattern %q can match no tool: upstream tools are named <upstream>__<tool>", p)
	}
}

// maxApprovalSeconds bounds approvals.timeout_seconds.
const maxApprovalSeconds = 86400

// Bounds of the rule language, so a policy stays something a person can read and a call's
// check stays cheap.
const (
	maxRules        = 256
	maxRuleValues   = 1024
	maxRulePattern  = 1000
	maxArgumentPath = 16
)

var (
	ruleEffects = []string{RuleDeny, RuleApprovalRequired}
	// argumentKey is one key of an argument path: anything but "." and control characters.
	argumentKey = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[^.\x00-\x1f\x7f]+$`) })
)

// rules checks a policy's argument rules: a tool glob as strict as deny's, a path of object
// keys, exactly one of allow (non-empty) and pattern (RE2, compiled here), and what happens
// otherwise.
func (v *validator) rules(at string, rs []Rule) {
	if len(rs) > maxRules {
		v.add(at, "%d rules, more than %d", len(rs), maxRules)
	}
	for i, r := range rs {
		rp := indexPath(at, i)
		if r.Tool == "" {
			v.add(rp+".tool", "is required: a glob over <upstream>__<tool> names")
		} else {
			v.pattern(rp+".tool", r.Tool)
		}
		keys := strings.Split(r.Argument, ".")
		switch {
		case r.Argument == "":
			v.add(rp+".argument", `is required: the argument's name, or a path of keys joined by "." (target.owner)`)
		case len(keys) > maxArgumentPath:
			v.add(rp+".argument", "a path of %d keys, more than %d", len(keys), maxArgumentPath)
		case !slices.ContainsFunc(keys, func(k string) bool { return !argumentKey().MatchString(k) }):
		default:
			v.add(rp+".argument", `%q is not a path of keys joined by "." (no empty key, no control character)`, r.Argument)
		}
		switch {
		case r.Allow == nil && r.Pattern == "":
			v.add(rp, "give allow (a list of values) or pattern (a regular expression): what the argument may be")
		case r.Allow != nil && r.Pattern != "":
			v.add(rp, "give allow or pattern, not both")
		case r.Allow != nil && len(r.Allow) == 0:
			v.add(rp+".allow", "is empty, so nothing is allowed; use otherwise: deny on a rule with a pattern that matches nothing, or remove the rule")
		case len(r.Allow) > maxRuleValues:
			v.add(rp+".allow", "%d values, more than %d", len(r.Allow), maxRuleValues)
		case len(r.Pattern) > maxRulePattern:
			v.add(rp+".pattern", "%d characters, more than %d", len(r.Pattern), maxRulePattern)
		case r.Pattern != "":
			if _, err := regexp.Compile(`^(?:` + r.Pattern + `)$`); err != nil {
				v.add(rp+".pattern", "not a regular expression (RE2 syntax): %v", err)
			}
		}
		if r.Otherwise == "" {
			v.add(rp+".otherwise", "is required: %s", strings.Join(ruleEffects, " or "))
		} else {
			v.enum(rp+".otherwise", "otherwise", r.Otherwise, ruleEffects)
		}
	}
}

// programPrefix is what an agent's saved programs' prefix may be; compiled at its first use.
var programPrefix = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`) })

func (v *validator) agent(tn string, t Tenant, tat, an string, a Agent) {
	at := keyPath(tat+".agents", an)
	switch {
	case an == ToolRunCode:
		v.add(at, "%q is a reserved tool name and cannot name an agent", ToolRunCode)
	case !name().MatchString(an):
		v.add(at, "invalid agent name %q: %s", an, nameRule)
	}
	if ap := a.Programs; ap != nil && ap.Prefix != "" && (!programPrefix().MatchString(ap.Prefix) || strings.Contains(ap.Prefix, "__")) {
		v.add(at+".programs.prefix", "invalid prefix %q: a lowercase Python name of at most 32 characters without \"__\"", ap.Prefix)
	}
	ce := a.CodeExecution
	if ce == nil {
		if a.Programs != nil {
			v.add(at+".programs", "saved programs are programs: the agent needs code_execution")
		}
		return
	}
	at += ".code_execution"
	if _, ok := v.c.Profiles[ce.Profile]; !ok {
		v.add(at+".profile", "unknown profile %q (defined: %s)", ce.Profile, list(slices.Sorted(maps.Keys(v.c.Profiles))))
	}
	v.enum(at+".isolation", "isolation", ce.Isolation, isolations)
	v.enum(at+".network", "network", ce.Network, networks)
	if p, ok := v.c.Profiles[ce.Profile]; ok && ce.Network == NetworkRules && p.Network == nil {
		v.add(at+".network", "rules needs network rules on profile %q (network: {allow: [...]})", ce.Profile)
	}
	v.limits(at+".limits", ce.Limits)
	if ce.Bindings == nil {
		return
	}
	seen := map[string]bool{}
	for i, b := range *ce.Bindings {
		p := indexPath(at+".bindings", i)
		if seen[b] {
			v.add(p, "binding %q is listed twice", b)
			continue
		}
		seen[b] = true
		v.binding(p, tn, t, b)
	}
}

// binding checks one explicit bindings entry. Whether the upstream still offers the tool is
// not checked: a config must not depend on somebody else's uptime, and a name that does not
// resolve comes back in the result as unavailable_bindings.
func (v *validator) binding(at, tn string, t Tenant, b string) {
	if b == ToolRunCode {
		v.add(at, "%q is reserved: a program cannot call run_code", ToolRunCode)
		return
	}
	if oneOf(b, builtins) {
		return
	}
	up, tool, ok := strings.Cut(b, "__")
	if !ok || up == "" {
		v.add(at, "%q is neither a built-in (%s) nor <upstream>__<tool>", b, strings.Join(builtins, ", "))
		return
	}
	if !slices.Contains(t.Upstreams, up) {
		v.add(at, "upstream %q is not granted to tenant %q (granted: %s)", up, tn, list(t.Upstreams))
		return
	}
	switch {
	case tool == "":
		v.add(at, "%q names no tool; use %s__<tool>, or %s__* for all of them", b, up, up)
	case tool != "*" && strings.ContainsAny(tool, "*?["):
		v.add(at, "%q: the only wildcard is a whole tool name, %s__*", b, up)
	}
}

// storage checks the ledger and blobs blocks: each, when present, names its store.
func (v *validator) storage() {
	if l := v.c.Ledger; l != nil {
		if l.Postgres == nil {
			v.add("ledger", "set postgres: {dsn: {env: NAME}}, or remove ledger for the SQLite ledger under data_dir")
		} else {
			v.credential("ledger.postgres.dsn", l.Postgres.DSN)
			if s := l.Postgres.LeaseSeconds; s != nil && (*s < 1 || *s > 3600) {
				v.add("ledger.postgres.lease_seconds", "%g is outside 1 to 3600", *s)
			}
		}
	}
	if b := v.c.Blobs; b != nil {
		if b.Postgres == nil {
			v.add("blobs", "set postgres: {dsn: {env: NAME}}, or remove blobs for files under data_dir")
		} else {
			v.credential("blobs.postgres.dsn", b.Postgres.DSN)
		}
	}
}

// oauth checks auth.oauth and the tenants' oauth blocks: a resource URI, trusted issuers by
// https (or loopback http) URL, and each subject admitted as one tenant only.
func (v *validator) oauth() {
	o := v.c.Auth.OAuth
	subjects := map[string]string{}
	for _, n := range slices.Sorted(maps.Keys(v.c.Tenants)) {
		t := v.c.Tenants[n].OAuth
		if t == nil {
			continue
		}
		at := keyPath("tenants", n) + ".oauth"
		if o == nil {
			v.add(at, "a tenant admitted by OAuth needs the top-level auth.oauth block (resource, issuers)")
		}
		if len(t.Subjects) == 0 {
			v.add(at+".subjects", "name at least one subject (the value of auth.oauth.tenant_claim) admitted as this tenant")
		}
		for i, s := range t.Subjects {
			p := indexPath(at+".subjects", i)
			if s == "" {
				v.add(p, "empty subject")
				continue
			}
			if first, dup := subjects[s]; dup {
				v.add(p, "subject already given at %s; a subject identifies exactly one tenant", first)
				continue
			}
			subjects[s] = p
		}
		for i, s := range t.Scopes {
			if s == "" || strings.ContainsAny(s, " \t\"\\") {
				v.add(indexPath(at+".scopes", i), "a scope is a non-empty token without spaces, quotes or backslashes")
			}
		}
	}
	if o == nil {
		return
	}
	at := "auth.oauth"
	v.oauthURL(at+".resource", o.Resource)
	if len(o.Issuers) == 0 {
		v.add(at+".issuers", "name at least one trusted issuer")
	}
	seen := map[string]bool{}
	for i, is := range o.Issuers {
		p := indexPath(at+".issuers", i)
		v.oauthURL(p+".issuer", is.Issuer)
		if seen[is.Issuer] {
			v.add(p+".issuer", "issuer given twice")
		}
		seen[is.Issuer] = true
		if in := is.Introspection; in != nil {
			if in.ClientID == "" {
				v.add(p+".introspection.client_id", "required: the client this server introspects opaque tokens as")
			}
			v.credential(p+".introspection.client_secret", in.ClientSecret)
		}
	}
}

// oauthURL checks an issuer or resource identifier: an absolute https URL (http only on
// loopback) without a query or fragment.
func (v *validator) oauthURL(at, raw string) {
	p, err := url.Parse(raw)
	switch {
	case raw == "":
		v.add(at, "required")
	case err != nil || p.Host == "":
		v.add(at, "not an absolute URL")
	case p.Scheme != "https" && !(p.Scheme == "http" && loopback(p.Hostname())):
		v.add(at, "must be an https URL (http only on a loopback host)")
	case p.RawQuery != "" || p.Fragment != "" || p.User != nil:
		v.add(at, "must have no query, fragment or credentials")
	}
}

// upstreamPaths checks a contained upstream's paths: absolute and clean, never the root or
// the kernel's own trees (the sandbox has fresh ones), each listed once.
func (v *validator) upstreamPaths(at string, p *UpstreamPaths) {
	seen := map[string]bool{}
	for _, l := range []struct {
		key   string
		paths []string
	}{{"read_only", p.ReadOnly}, {"read_write", p.ReadWrite}} {
		for i, s := range l.paths {
			k := indexPath(at+"."+l.key, i)
			switch {
			case !strings.HasPrefix(s, "/") || path.Clean(s) != s:
				v.add(k, "%q is not an absolute, clean path", s)
			case s == "/" || s == "/proc" || s == "/dev" || s == "/sys" || strings.HasPrefix(s, "/proc/") ||
				strings.HasPrefix(s, "/dev/") || strings.HasPrefix(s, "/sys/"):
				v.add(k, "%q cannot be given to a sandbox: the root and the kernel's own trees are the sandbox's", s)
			case seen[s]:
				v.add(k, "%q is listed twice", s)
			}
			seen[s] = true
		}
	}
}
