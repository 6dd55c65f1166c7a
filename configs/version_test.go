package configs

import (
	"regexp"
	"strings"
	"testing"
)

// versionBase is an agent definition; each case below changes it in one line.
var versionBase = []string{
	"profiles:", // 0
	"  default: {}",
	"  heavy: {hard_limits: {wall_seconds: 120}}", // 2
	"upstreams: {docs: {command: [d]}, support: {command: [s]}, extra: {command: [e]}}",
	"tenants:",
	"  acme:",
	"    tokens: [" + tokenA + "]", // 6
	"    upstreams: [docs, support]",
	"    policy: {deny: ['docs__rm*', 'docs__drop*']}", // 8
	"    agents:",
	"      analyst:",
	"        expose_upstream_tools: true", // 11
	"        code_execution:",
	"          profile: heavy", // 13
	"          bindings: [docs__search, support__lookup]",
	"          limits: {wall_seconds: 60}", // 15
	"      other: {}",
}

// with returns versionBase with line i replaced (by one or more lines).
func with(i int, line string) []string {
	l := append([]string(nil), versionBase...)
	l[i] = line
	return l
}

func versionOf(t *testing.T, name string, lines []string) string {
	t.Helper()
	c, err := Parse(doc(lines...), "v.yaml")
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	v, err := c.AgentVersion("acme", "analyst")
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

func TestAgentVersionStable(t *testing.T) {
	base := versionOf(t, "base", versionBase)
	if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(base) {
		t.Fatalf("AgentVersion = %q, want sha256:<64 hex>", base)
	}
	reordered := strings.Join([]string{
		"tenants:",
		"  acme:",
		"    agents:",
		"      other: {}",
		"      analyst:",
		"        code_execution: {limits: {wall_seconds: 60.0}, bindings: [support__lookup, docs__search], profile: heavy}",
		"        expose_upstream_tools: true",
		"    policy:",
		"      deny:",
		"        - docs__drop*",
		"        - docs__rm*",
		"    upstreams: [support, docs]",
		"upstreams: {extra: {command: [e]}, support: {command: [s]}, docs: {command: [d]}}",
		"profiles:",
		"  heavy:",
		"    hard_limits:",
		"      wall_seconds: 120",
		"  default: {}",
	}, "\n")
	same := map[string][]string{
		"everything reordered":      {reordered},
		"defaults spelled out":      with(2, "  heavy: {backend: local, isolation: process, run_as: '65534:65534', hard_limits: {wall_seconds: 120, cpu_seconds: 10, memory_bytes: 512MiB}}"),
		"code defaults spelled out": with(13, "          profile: heavy\n          isolation: process\n          network: none"),
		"size spelled in bytes":     with(2, "  heavy: {hard_limits: {wall_seconds: 120}, output: {max_bytes: 8388608}}"),
		"profile by default":        with(1, "  default: {}\n  # a comment"),
		"token rotated":             with(6, "    tokens: []"),
		"another profile changed":   with(1, "  default: {backend: process}"),
		"another agent changed":     with(16, "      other: {expose_upstream_tools: true}"),
		"upstream address changed":  with(3, "upstreams: {docs: {url: https://docs.example}, support: {command: [s]}, extra: {command: [e]}}"),
		"duplicate grant patterns":  with(8, "    policy: {deny: ['docs__rm*', 'docs__drop*', 'docs__rm*']}"),
		"destructive default":       with(8, "    policy: {deny: ['docs__rm*', 'docs__drop*'], destructive_needs_approval: true}"),
		"approvals default":         with(2, "  heavy: {hard_limits: {wall_seconds: 120}, approvals: {timeout_seconds: 120}}"),
		"quotas":                    with(8, "    policy: {deny: ['docs__rm*', 'docs__drop*'], quotas: {max_concurrent_executions: 1, max_sessions: 2}}"),
	}
	for name, lines := range same {
		if got := versionOf(t, name, lines); got != base {
			t.Errorf("%s: version changed", name)
		}
	}
}

func TestAgentVersionSensitive(t *testing.T) {
	different := map[string][]string{
		"base":                   versionBase,
		"profile hard limit":     with(2, "  heavy: {hard_limits: {wall_seconds: 121}}"),
		"profile backend":        with(2, "  heavy: {backend: container, hard_limits: {wall_seconds: 120}}"),
		"profile network":        with(2, "  heavy: {allow_network: true, hard_limits: {wall_seconds: 120}}"),
		"profile budget":         with(2, "  heavy: {binding_budget: {max_calls: 10}, hard_limits: {wall_seconds: 120}}"),
		"profile output":         with(2, "  heavy: {output: {preserve: required}, hard_limits: {wall_seconds: 120}}"),
		"profile artifacts":      with(2, "  heavy: {artifacts: {collection: ignore}, hard_limits: {wall_seconds: 120}}"),
		"profile env":            with(2, "  heavy: {env_allowlist: [TZ], hard_limits: {wall_seconds: 120}}"),
		"profile named":          with(13, "          profile: default"),
		"request":                with(15, "          limits: {wall_seconds: 61}"),
		"request spelled out":    with(15, "          limits: {wall_seconds: 60, cpu_seconds: 10}"),
		"isolation":              with(13, "          profile: heavy\n          isolation: isolated"),
		"network":                with(13, "          profile: heavy\n          network: unrestricted"),
		"bindings narrowed":      with(14, "          bindings: [docs__search]"),
		"bindings null":          with(14, "          bindings: null"),
		"bindings empty":         with(14, "          bindings: []"),
		"expose":                 with(11, "        expose_upstream_tools: false"),
		"policy deny":            with(8, "    policy: {deny: ['docs__rm*']}"),
		"policy approval":        with(8, "    policy: {deny: ['docs__rm*', 'docs__drop*'], approval_required: ['docs__*']}"),
		"policy limits":          with(8, "    policy: {deny: ['docs__rm*', 'docs__drop*'], limits: {wall_seconds: 5}}"),
		"policy budget":          with(8, "    policy: {deny: ['docs__rm*', 'docs__drop*'], binding_budget: {max_calls: 5}}"),
		"policy destructive":     with(8, "    policy: {deny: ['docs__rm*', 'docs__drop*'], destructive_needs_approval: false}"),
		"policy rules":           with(8, "    policy: {deny: ['docs__rm*', 'docs__drop*'], rules: [{tool: 'docs__*', argument: repo, allow: [a], otherwise: deny}]}"),
		"policy rules otherwise": with(8, "    policy: {deny: ['docs__rm*', 'docs__drop*'], rules: [{tool: 'docs__*', argument: repo, allow: [a], otherwise: approval_required}]}"),
		"approvals timeout":      with(2, "  heavy: {hard_limits: {wall_seconds: 120}, approvals: {timeout_seconds: 30}}"),
		"policy network":         with(8, "    policy: {deny: ['docs__rm*', 'docs__drop*'], allow_network: false}"),
		"policy network granted": with(8, "    policy: {deny: ['docs__rm*', 'docs__drop*'], allow_network: true}"),
		"grants":                 with(7, "    upstreams: [docs, support, extra]"),
	}
	// "no code execution" must drop the whole block; rebuild it without lines 12-15.
	different["no code execution"] = append(append([]string(nil), versionBase[:12]...), versionBase[16:]...)
	seen := map[string]string{}
	for name, lines := range different {
		got := versionOf(t, name, lines)
		if prev, dup := seen[got]; dup {
			t.Errorf("%s: same version as %s", name, prev)
		}
		seen[got] = name
	}
}

func TestAgentVersionErrors(t *testing.T) {
	c := Default()
	if _, err := c.AgentVersion("nobody", "default"); err == nil {
		t.Error("unknown tenant accepted")
	}
	if _, err := c.AgentVersion("local", "nobody"); err == nil {
		t.Error("unknown agent accepted")
	}
	v1, err := c.AgentVersion("local", "default")
	if err != nil {
		t.Fatal(err)
	}
	if v2, _ := Default().AgentVersion("local", "default"); v1 != v2 {
		t.Error("version not stable across loads")
	}
	// A hand-built Config with zero values hashes as its defaults.
	hb := &Config{
		Profiles: map[string]Profile{"default": {}},
		Tenants: map[string]Tenant{"local": {Agents: map[string]Agent{
			"default": {ExposeUpstreamTools: true, CodeExecution: &CodeExecution{}},
		}}},
	}
	if v3, err := hb.AgentVersion("local", "default"); err != nil || v3 != v1 {
		t.Errorf("hand-built equivalent of default.yaml: version %q, %v; want %q", v3, err, v1)
	}
	hb.Tenants["local"].Agents["default"].CodeExecution.Profile = "missing"
	if _, err := hb.AgentVersion("local", "default"); err == nil {
		t.Error("unknown profile accepted")
	}
}

// Argument rules all apply to every call: their order, and the order of allowed values, mean
// nothing.
func TestAgentVersionRulesOrder(t *testing.T) {
	a := versionOf(t, "a", with(8, "    policy: {rules: [{tool: 'docs__*', argument: repo, allow: [a, b], otherwise: deny}, {tool: 'support__*', argument: q, pattern: 'x+', otherwise: approval_required}]}"))
	b := versionOf(t, "b", with(8, "    policy: {rules: [{tool: 'support__*', argument: q, pattern: 'x+', otherwise: approval_required}, {tool: 'docs__*', argument: repo, allow: [b, a, a], otherwise: deny}]}"))
	if a != b {
		t.Error("reordered rules changed the version")
	}
}
