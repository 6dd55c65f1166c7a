package configs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// A profile that says nothing gets every default of docs/design.md §3.2; an agent's code_execution
// gets its own; nothing else is invented.
func TestDefaults(t *testing.T) {
	c, err := Parse(doc(
		"profiles:",
		"  default: {}",
		"  partial:",
		"    hard_limits: {wall_seconds: 60}",
		"    output: {preserve: required}",
		"tenants:",
		"  t:",
		"    agents:",
		"      plain: {}",
		"      coder: {code_execution: {}}",
	), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	def := Profile{
		Backend:       "local",
		Isolation:     "process",
		RunAs:         "65534:65534",
		HardLimits:    Limits{CPUSeconds: Seconds(10), WallSeconds: Seconds(30), MemoryBytes: Bytes(512 * MiB), FileSizeBytes: Bytes(10 * MiB), ProcessCount: Count(64)},
		BindingBudget: BindingBudget{MaxCalls: Count(200), MaxTotalBytes: Bytes(8 * MiB), MaxProducedBytes: Bytes(64 * MiB), MaxPreservedBytes: Bytes(64 * MiB), MaxArgumentBytes: Bytes(256 * KiB), MaxResultBytes: Bytes(1 * MiB)},
		Output:        OutputPolicy{PreviewBytes: Bytes(4000), MaxBytes: Bytes(8 * MiB), Preserve: "when_available"},
		Artifacts:     ArtifactPolicy{Collection: "collect", MaxFiles: Count(64), MaxBytes: Bytes(16 * MiB)},
		Approvals:     Approvals{TimeoutSeconds: Seconds(120), PlanSeconds: Seconds(600)},
		Images:        Images{InlineBytes: Bytes(512 * KiB)},
		Warm:          Warm{Min: Count(1), Max: Count(4), IdleSeconds: Seconds(300), Start: Text(WarmStartAuto)},
	}
	partial := def
	partial.HardLimits.WallSeconds = Seconds(60)
	partial.Output.Preserve = "required"
	want := &Config{
		Profiles:  map[string]Profile{"default": def, "partial": partial},
		Upstreams: map[string]Upstream{},
		Tenants: map[string]Tenant{"t": {Agents: map[string]Agent{
			"plain": {},
			"coder": {CodeExecution: &CodeExecution{Profile: "default", Isolation: "process", Network: "none"}},
		}}},
	}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("Parse() (-want +got):\n%s", diff)
	}
	// A container profile gets the container block's defaults; no other profile gets one.
	c, err = Parse(doc(
		"profiles:",
		"  boxed: {backend: container}",
		"  pinned: {backend: container, container: {image: 'python@sha256:"+strings.Repeat("0", 64)+"'}}",
		"tenants: {t: {agents: {a: {}}}}",
	), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Profiles["boxed"].Container, (&Container{Image: DefaultContainerImage, Python: DefaultContainerPython}); !cmp.Equal(got, want) {
		t.Errorf("boxed container %+v, want %+v", got, want)
	}
	if got := c.Profiles["pinned"].Container; got.Image != "python@sha256:"+strings.Repeat("0", 64) || got.Python != DefaultContainerPython {
		t.Errorf("pinned container %+v", got)
	}
	// The exported default constructors agree with what Parse fills.
	if diff := cmp.Diff(def.HardLimits, DefaultHardLimits()); diff != "" {
		t.Errorf("DefaultHardLimits (-want +got):\n%s", diff)
	}
}

// The embedded default.yaml is valid, spells out exactly the defaults, and is what §3.1
// promises: tenant local, agent default opted in on profile default, no upstreams.
func TestDefaultYAML(t *testing.T) {
	c := Default()
	// Default parses default.yaml without its comment lines: exact only while no block
	// scalar could hold a line that looks like one.
	if regexp.MustCompile(`(?m):\s*[|>][-+0-9]*\s*(#.*)?$`).Match(defaultYAML) {
		t.Error("default.yaml has a block scalar: Default's stripping of comment lines may change it")
	}
	whole, err := Parse(defaultYAML, "default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(whole, c, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("default.yaml parsed whole differs from Default() (-whole +Default):\n%s", diff)
	}
	if diff := cmp.Diff(withProfileDefaults(Profile{}), c.Profiles["default"], cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("default.yaml profile differs from the built-in defaults (-want +got):\n%s", diff)
	}
	if len(c.Profiles) != 1 || len(c.Upstreams) != 0 || len(c.Tenants) != 1 {
		t.Errorf("Default() has %d profiles, %d upstreams, %d tenants; want 1, 0, 1", len(c.Profiles), len(c.Upstreams), len(c.Tenants))
	}
	local := c.Tenants["local"]
	if len(local.Tokens) != 0 {
		t.Errorf("tenant local has tokens")
	}
	want := Agent{ExposeUpstreamTools: true, CodeExecution: &CodeExecution{Profile: "default", Isolation: "process", Network: "none"}}
	if diff := cmp.Diff(want, local.Agents["default"]); diff != "" {
		t.Errorf("agent default (-want +got):\n%s", diff)
	}
	if c.DataDir != "" {
		t.Errorf("DataDir = %q, want \"\"", c.DataDir)
	}
	if a, b := Default(), Default(); a == b {
		t.Error("Default() returned a shared value")
	}
	y := DefaultYAML()
	y[0] = 'X'
	if bytes.Equal(y, DefaultYAML()) {
		t.Error("DefaultYAML() returned a shared slice")
	}
}

// Every decoding problem names file, line and key path; all of them are reported at once.
func TestStrictDecoding(t *testing.T) {
	checkProblems(t, "default.yaml", []problemCase{
		{
			name: "unknown key",
			data: doc(
				"# a comment",
				"profiles:",
				"  default:",
				"    backend: local",
				"    hard_limits:",
				"      wall_seconds: 30",
				"      cpu_secs: 10",
				"tenants: {t: {agents: {a: {}}}}",
			),
			want: []string{"default.yaml:7: profiles.default.hard_limits.cpu_secs: unknown key"},
		},
		{
			name: "unknown key close to a known one",
			data: doc(
				"profiles: {default: {hard_limits: {wal_seconds: 3}}}",
				"tenantz: {}",
			),
			want: []string{
				"default.yaml:1: profiles.default.hard_limits.wal_seconds: unknown key; did you mean wall_seconds?",
				"default.yaml:2: tenantz: unknown key; did you mean tenants?",
			},
		},
		{
			name: "duplicate keys",
			data: doc(
				"profiles:",
				"  default: {}",
				"  default: {}",
				"tenants:",
				"  t:",
				"    agents: {a: {}}",
				"    agents: {b: {}}",
				"data_dir: x",
				"data_dir: y",
			),
			want: []string{
				"default.yaml:3: profiles.default: duplicate key (first at line 2)",
				"default.yaml:7: tenants.t.agents: duplicate key (first at line 6)",
				"default.yaml:9: data_dir: duplicate key (first at line 8)",
			},
		},
		{
			name: "wrong types",
			data: doc(
				"data_dir: [a]",
				"profiles:",
				"  default:",
				"    python: 3.12",
				"    allow_network: yes",
				"    hard_limits: {cpu_seconds: ten, process_count: 1.5}",
				"    env_allowlist: PATH",
				"upstreams:",
				"  a: {command: x, env: {N: 1}, deferred: 1}",
				"tenants: [t]",
			),
			want: []string{
				"default.yaml:1: data_dir: expected a string, got a sequence",
				"default.yaml:4: profiles.default.python: expected a string, got a number (quote it if it is meant as text)",
				"default.yaml:5: profiles.default.allow_network: expected a boolean (true or false), got a string",
				"default.yaml:6: profiles.default.hard_limits.cpu_seconds: expected a number, got a string",
				"default.yaml:6: profiles.default.hard_limits.process_count: expected an integer, got a number",
				"default.yaml:7: profiles.default.env_allowlist: expected a sequence, got a string",
				"default.yaml:9: upstreams.a.command: expected a sequence, got a string",
				"default.yaml:9: upstreams.a.env.N: expected a string, got an integer (quote it if it is meant as text)",
				"default.yaml:9: upstreams.a.deferred: expected a boolean (true or false), got an integer",
				"default.yaml:10: tenants: expected a mapping, got a sequence",
			},
		},
		{
			name: "integer out of range",
			data: doc("profiles: {default: {hard_limits: {process_count: 99999999999999999999}}}"),
			want: []string{"default.yaml:1: profiles.default.hard_limits.process_count: expected an integer, got a number"},
		},
		{
			name: "integer out of int64 range",
			data: doc("profiles: {default: {hard_limits: {process_count: 18446744073709551615}}}"),
			want: []string{"default.yaml:1: profiles.default.hard_limits.process_count: integer out of range"},
		},
		{
			name: "odd keys are quoted in paths",
			data: doc("tenants: {\"a.b\": {agents: {x: {bogus: 1}}}}"),
			want: []string{`default.yaml:1: tenants["a.b"].agents.x.bogus: unknown key`},
		},
		{
			name: "non-string key",
			data: doc("tenants: {t: {agents: {[a]: {}}}}"),
			want: []string{"default.yaml:1: tenants.t.agents: a key must be a string, got a sequence"},
		},
		{
			name: "merge keys",
			data: doc(
				"base: &b {backend: local}",
				"profiles:",
				"  default:",
				"    <<: *b",
			),
			want: []string{
				"default.yaml:1: base: unknown key",
				"default.yaml:4: profiles.default: merge keys (<<) are not supported; repeat the keys or use an alias for the whole value",
			},
		},
		{
			name: "local tags",
			data: doc("data_dir: !env HOME"),
			want: []string{"default.yaml:1: data_dir: unsupported tag !env"},
		},
		{
			name: "empty",
			data: []byte(""),
			want: []string{"default.yaml: empty document"},
		},
		{
			name: "only comments",
			data: doc("# nothing here", ""),
			want: []string{"default.yaml: empty document"},
		},
		{
			name: "null document",
			data: doc("~"),
			want: []string{"default.yaml: empty document"},
		},
		{
			name: "two documents",
			data: doc("data_dir: a", "---", "data_dir: b"),
			want: []string{"default.yaml:2: more than one YAML document; a config is exactly one"},
		},
		{
			name: "top level not a mapping",
			data: doc("- a", "- b"),
			want: []string{"default.yaml:1: expected a mapping at the top level, got a sequence"},
		},
		{
			// yaml.v3 names the line where the enclosing construct began (here line 1); the
			// problem is the line that opened what never closed.
			name: "syntax error",
			data: doc("profiles:", "  default: {", "tenants: x"),
			want: []string{`default.yaml:2: invalid YAML: did not find expected ',' or '}'; line 2 reads "  default: {"`},
		},
		{
			name: "scanner error",
			data: doc("profiles:", "  default:", "	backend: local"),
			want: []string{`default.yaml:3: invalid YAML: found character that cannot start any token; line 3 reads "\tbackend: local"`},
		},
		{
			name: "indentation",
			data: doc("profiles:", "  default:", "    backend: local", "   isolation: process", "tenants: {}"),
			want: []string{`default.yaml:4: invalid YAML: did not find expected key; line 4 reads "   isolation: process"`},
		},
		{
			// The first key of a block sets its indentation, so yaml.v3 objects only at the
			// next key: the shifted line is the one named (issue 23: one line late).
			name: "a block's first key shifted",
			data: doc("profiles:", "  default:", "     backend: local", "    isolation: process", "    run_as: \"1000\"", "tenants: {}"),
			want: []string{`default.yaml:3: invalid YAML: did not find expected key; line 3 reads "     backend: local"`},
		},
		{
			name: "a block's first key shifted left",
			data: doc("profiles:", "  default:", "   backend: local", "    isolation: process", "    run_as: \"1000\"", "tenants: {}"),
			want: []string{`default.yaml:3: invalid YAML: mapping values are not allowed in this context; line 3 reads "   backend: local"`},
		},
		{
			name: "a key shifted out of its block",
			data: doc("profiles:", "  default:", "    hard_limits:", "      cpu_seconds: 5", "    wall_seconds: 9", "      memory_bytes: 64MiB", "tenants: {}"),
			want: []string{`default.yaml:5: invalid YAML: mapping values are not allowed in this context; line 5 reads "    wall_seconds: 9"`},
		},
		{
			name: "a parent shifted off the document's step",
			data: doc("profiles:", "   default:", "    backend: local", "  other:", "    backend: local", "tenants: {}"),
			want: []string{`default.yaml:2: invalid YAML: did not find expected key; line 2 reads "   default:"`},
		},
		{
			name: "an error yaml.v3 gives no line for",
			data: doc("data_dir: x", "tenants: a: b"),
			want: []string{`default.yaml:2: invalid YAML: mapping values are not allowed in this context; line 2 reads "tenants: a: b"`},
		},
		{
			name: "the value of a credential-like key is not quoted",
			data: doc("upstreams:", "  u: {url: \"https://x.example\"}", "  bearer: \"s3cret", "tenants: {}"),
			want: []string{`default.yaml:3: invalid YAML: found unexpected end of stream; line 3 reads "  bearer: …"`},
		},
		{
			name: "nor in a flow mapping",
			data: doc("upstreams:", "  u: {url: \"https://x.example\", bearer: {env: \"X}}", "tenants: {}"),
			want: []string{`default.yaml:2: invalid YAML: found unexpected end of stream; line 2 reads "  u: {url: \"https://x.example\", bearer: …"`},
		},
		{
			name: "a flow mapping over several lines, then an error",
			data: doc("profiles: {default: {backend: local,", "  isolation: process}}", "tenants:", "  t: {agents: {a: {}}}", " x: 1"),
			want: []string{`default.yaml:5: invalid YAML: did not find expected key; line 5 reads " x: 1"`},
		},
		{
			name: "sandbox beside profiles.default",
			data: doc(
				"profiles: {default: {}}",
				"sandbox: {backend: process}",
				"tenants: {t: {agents: {a: {}}}}",
			),
			want: []string{"default.yaml:2: sandbox: conflicts with profiles.default: the sandbox block is the profile named \"default\"; keep one"},
		},
	})
}

// The error reads as the design's example: file, line, key path, what is wrong.
func TestErrorText(t *testing.T) {
	_, err := Parse(doc("profiles: {default: {hard_limits: {cpu_secs: 1}}}"), "default.yaml")
	const want = "config_invalid: invalid configuration: default.yaml:1: profiles.default.hard_limits.cpu_secs: unknown key"
	if err == nil || err.Error() != want {
		t.Errorf("error = %v\nwant  %s", err, want)
	}
}

func TestAliasesAreFollowedAndBounded(t *testing.T) {
	c, err := Parse(doc(
		"profiles:",
		"  default: &p {hard_limits: {wall_seconds: 5}}",
		"  other: *p",
		"tenants: {t: {agents: {a: {}}}}",
	), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := *c.Profiles["other"].HardLimits.WallSeconds; got != 5 {
		t.Errorf("aliased wall_seconds = %v, want 5", got)
	}

	// A billion laughs stops at the node bound instead of expanding: 1000 agents aliasing one
	// agent with 1000 bindings, in each of three tenants, is 3M nodes from a few kilobytes.
	var b bytes.Buffer
	b.WriteString("tenants:\n  t0:\n    agents: &ags\n      a0: &ag {code_execution: {bindings: [")
	for i := range 1000 {
		fmt.Fprintf(&b, "x__%d, ", i)
	}
	b.WriteString("]}}\n")
	for i := 1; i < 1000; i++ {
		fmt.Fprintf(&b, "      a%d: *ag\n", i)
	}
	b.WriteString("  t1: {agents: *ags}\n  t2: {agents: *ags}\n")
	_, err = Parse(b.Bytes(), "t.yaml")
	ps := problemsOf(t, err)
	if len(ps) != 1 || !strings.Contains(ps[0], "document too large: more than 1048576 nodes after expanding aliases") {
		t.Errorf("problems = %.300q", ps)
	}
}

// `sandbox:` is the profile named default.
func TestSandboxIsTheDefaultProfile(t *testing.T) {
	c, err := Parse(doc(
		"sandbox: {backend: process, hard_limits: {wall_seconds: 5}}",
		"tenants: {t: {agents: {a: {code_execution: {}}}}}",
	), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Sandbox != nil {
		t.Error("Sandbox not folded into Profiles")
	}
	p, ok := c.Profile("default")
	if !ok || p.Backend != "process" || *p.HardLimits.WallSeconds != 5 || *p.HardLimits.CPUSeconds != 10 {
		t.Errorf("Profile(default) = %+v, %v", p, ok)
	}
	// Problems in it are named as written.
	_, err = Parse(doc(
		"sandbox: {backend: vm}",
		"tenants: {t: {agents: {a: {}}}}",
	), "t.yaml")
	want := []string{`t.yaml:1: sandbox.backend: unknown backend "vm" (one of local, process, namespaces, bwrap, container, remote)`}
	if diff := cmp.Diff(want, problemsOf(t, err)); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	// A hand-built Config with Sandbox validates and looks up the same way.
	hb := &Config{Sandbox: &Profile{}, Tenants: map[string]Tenant{"t": {Agents: map[string]Agent{"a": {CodeExecution: &CodeExecution{}}}}}}
	if err := hb.Validate(); err != nil {
		t.Errorf("hand-built Validate() = %v", err)
	}
	if _, ok := hb.Profile("default"); !ok {
		t.Error("hand-built Profile(default) not found")
	}
}

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const tokenA = "sha256:0b36bc3241c198bd6e2ca4d0fe4c390a89b31fdde7fc287bd7a4617df307090f"

func TestTenantsDir(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"config.yaml": string(doc(
			"tenants_dir: tenants",
			"profiles: {default: {}}",
			"upstreams: {search: {command: [s]}}",
			"tenants:",
			"  local: {agents: {default: {}}}",
		)),
		"tenants/acme.yaml": string(doc(
			"tokens: ["+tokenA+"]",
			"upstreams: [search]",
			"agents:",
			"  analyst: {code_execution: {bindings: [search__*]}}",
		)),
		"tenants/README.md":  "not a tenant",
		"tenants/.acme.swp":  "editor junk",
		"tenants/sub/x.yaml": "ignored: true",
	})
	c, err := Load(filepath.Join(dir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.TenantsDir != filepath.Join(dir, "tenants") {
		t.Errorf("TenantsDir = %q, want it resolved against the config's directory", c.TenantsDir)
	}
	bindings := []string{"search__*"}
	want := map[string]Tenant{
		"local": {Agents: map[string]Agent{"default": {}}},
		"acme": {
			Tokens:    []string{tokenA},
			Upstreams: []string{"search"},
			Agents: map[string]Agent{"analyst": {CodeExecution: &CodeExecution{
				Profile: "default", Isolation: "process", Network: "none", Bindings: &bindings,
			}}},
		},
	}
	if diff := cmp.Diff(want, c.Tenants); diff != "" {
		t.Errorf("Tenants (-want +got):\n%s", diff)
	}

	got, err := LoadTenantsDir(filepath.Join(dir, "tenants"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want["acme"], got["acme"]); diff != "" || len(got) != 1 {
		t.Errorf("LoadTenantsDir (-want +got):\n%s", diff)
	}
}

func TestTenantsDirProblems(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"config.yaml": string(doc(
			"tenants_dir: tenants",
			"profiles: {default: {}}",
			"tenants:",
			"  acme: {agents: {default: {}}}",
		)),
		"tenants/acme.yaml":   string(doc("agents: {default: {}}")),
		"tenants/beta.yaml":   string(doc("agents:", "  default: {code_execution: {profile: heavy}}")),
		"tenants/gamma.yml":   string(doc("agents: {default: {}}")),
		"tenants/delta.yaml":  string(doc("agents: {default: {}}", "tokenz: []")),
		"tenants/empty.yaml":  "",
		"tenants/bad!.yaml":   string(doc("agents: {default: {}}")),
		"tenants/shared.yaml": string(doc("tokens: ["+tokenA+", "+tokenA+"]", "agents: {default: {}}")),
	})
	cfg := filepath.Join(dir, "config.yaml")
	tdir := filepath.Join(dir, "tenants")
	_, err := Load(cfg)
	want := []string{
		cfg + `:4: tenants.acme: tenant "acme" is defined both here and in ` + filepath.Join(tdir, "acme.yaml"),
		filepath.Join(tdir, "delta.yaml") + ":2: tenants.delta.tokenz: unknown key; did you mean tokens?",
		filepath.Join(tdir, "empty.yaml") + ": empty document",
		filepath.Join(tdir, "gamma.yml") + ": tenant files are named <tenant>.yaml; rename this file or it will never be read",
	}
	if diff := cmp.Diff(want, problemsOf(t, err)); diff != "" {
		t.Errorf("decode problems (-want +got):\n%s", diff)
	}

	// With decoding clean, validation problems are located in the tenant's own file.
	for _, f := range []string{"acme.yaml", "gamma.yml", "delta.yaml", "empty.yaml"} {
		os.Remove(filepath.Join(tdir, f))
	}
	_, err = Load(cfg)
	want = []string{
		filepath.Join(tdir, "bad!.yaml") + `:1: tenants["bad!"]: invalid tenant name "bad!": use letters, digits, '.', '_' and '-', starting and ending with a letter or digit, at most 64 characters`,
		filepath.Join(tdir, "beta.yaml") + `:2: tenants.beta.agents.default.code_execution.profile: unknown profile "heavy" (defined: default)`,
		filepath.Join(tdir, "shared.yaml") + ":1: tenants.shared.tokens[1]: token already given at tenants.shared.tokens[0]; a token identifies exactly one tenant",
	}
	if diff := cmp.Diff(want, problemsOf(t, err)); diff != "" {
		t.Errorf("validation problems (-want +got):\n%s", diff)
	}

	if _, err := LoadTenantsDir(filepath.Join(dir, "missing")); err == nil {
		t.Error("LoadTenantsDir(missing) succeeded")
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("Load(missing) succeeded")
	}
}

// Relative paths in a loaded file mean the same whatever the working directory.
func TestLoadResolvesPaths(t *testing.T) {
	dir := writeFiles(t, map[string]string{"etc/c.yaml": string(doc(
		"data_dir: state",
		"profiles: {default: {}}",
		"upstreams:",
		"  local: {command: [./bin/server, ./arg]}",
		"  path: {command: [npx, x]}",
		"  abs: {command: [/usr/bin/server]}",
		"  remote: {url: https://x.example/mcp, bearer: {file: secrets/token}}",
		"  peer: {a2a: {url: https://agent.example, bearer: {file: secrets/peer}}}",
		"tenants: {t: {agents: {a: {}}}}",
	))})
	c, err := Load(filepath.Join(dir, "etc", "c.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	etc := filepath.Join(dir, "etc")
	got := []string{c.DataDir, c.Upstreams["local"].Command[0], c.Upstreams["local"].Command[1], c.Upstreams["path"].Command[0], c.Upstreams["abs"].Command[0], c.Upstreams["remote"].Bearer.File, c.Upstreams["peer"].A2A.Bearer.File}
	want := []string{filepath.Join(etc, "state"), filepath.Join(etc, "bin/server"), "./arg", "npx", "/usr/bin/server", filepath.Join(etc, "secrets/token"), filepath.Join(etc, "secrets/peer")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("paths (-want +got):\n%s", diff)
	}

	// "-" and "" are not paths.
	for _, dd := range []string{`"-"`, `""`} {
		dir := writeFiles(t, map[string]string{"c.yaml": string(doc("data_dir: "+dd, "tenants: {t: {agents: {a: {}}}}"))})
		c, err := Load(filepath.Join(dir, "c.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]string{`"-"`: "-", `""`: ""}[dd]; c.DataDir != want {
			t.Errorf("data_dir %s loaded as %q", dd, c.DataDir)
		}
	}
}

func TestLoadBounded(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(p, bytes.Repeat([]byte("#"), maxFileBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err == nil {
		t.Error("Load of an oversized file succeeded")
	}
}

func TestDefaultDataDir(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string
	}{
		{env: map[string]string{"XDG_STATE_HOME": "/xdg", "HOME": "/home/me"}, want: "/xdg/mcp-sandbox"},
		{env: map[string]string{"HOME": "/home/me"}, want: "/home/me/.local/state/mcp-sandbox"},
		{env: map[string]string{"XDG_STATE_HOME": "relative", "HOME": "/home/me"}, want: "/home/me/.local/state/mcp-sandbox"},
		{env: map[string]string{}, want: ""},
	}
	for _, tt := range tests {
		if got := DefaultDataDir(func(k string) string { return tt.env[k] }); got != tt.want {
			t.Errorf("DefaultDataDir(%v) = %q, want %q", tt.env, got, tt.want)
		}
	}
}

// LoadWith refuses a backend the schema knows but the loading build does not have, at its
// line; Load (no Options) accepts every backend the schema names.
func TestLoadWithBackends(t *testing.T) {
	dir := writeFiles(t, map[string]string{"c.yaml": string(doc(
		"profiles:",
		"  default: {backend: local}",
		"  boxed: {backend: container}",
		"tenants: {t: {agents: {a: {}}}}",
	))})
	path := filepath.Join(dir, "c.yaml")
	if _, err := Load(path); err != nil {
		t.Fatalf("Load: %v", err)
	}
	_, err := LoadWith(path, &Options{Backends: []string{BackendLocal, BackendProcess}})
	want := []string{path + `:3: profiles.boxed.backend: backend "container" is not in this build of mcp-sandbox (it has local, process)`}
	if diff := cmp.Diff(want, problemsOf(t, err)); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}
