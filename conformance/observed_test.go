package conformance

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/internal/pgdb/pgtest"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// toolInfo is the part of get_tool_info's answer about the return type.
type toolInfo struct {
	PythonStub string `json:"python_stub"`
	OutputType struct {
		Source  string   `json:"source"`
		Samples int      `json:"samples"`
		Drift   []string `json:"drift"`
	} `json:"output_type"`
}

func getToolInfo(t *testing.T, cs *mcp.ClientSession, name string) toolInfo {
	t.Helper()
	res := call(t, cs, "get_tool_info", map[string]any{"name": name})
	var info toolInfo
	if b, err := structured(res, &info); err != nil || res.IsError {
		t.Fatalf("get_tool_info %s: %v %s", name, err, b)
	}
	return info
}

// TestObservedReturnType (issue 29, must-show 2): a tool without an outputSchema, called three
// times by one tenant (by its programs and directly by its host), has its observed return type
// in get_tool_info's python_stub, with the sample count, in a stub mypy accepts; a result of a
// changed shape is reported as drift, to the host and to a program. Another tenant of the same
// server, served by the same process, has seen nothing and is told nothing.
func TestObservedReturnType(t *testing.T) {
	dir := t.TempDir()
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
data_dir: %[2]q
`+processProfile+`    hard_limits: {wall_seconds: 60}
upstreams:
  support: {command: [%[1]q]}
tenants:
  a:
    tokens: [%[3]q]
    upstreams: [support]
    agents: {default: {expose_upstream_tools: true, code_execution: {limits: {wall_seconds: 60}}}}
  b:
    tokens: [%[4]q]
    upstreams: [support]
    agents: {default: {expose_upstream_tools: true, code_execution: {limits: {wall_seconds: 60}}}}
`, built.mock, filepath.Join(dir, "data"), configs.HashToken("token-a"), configs.HashToken("token-b")))
	base := ecoStartHTTP(t, cfg)
	a := httpSession(t, base+"/mcp", "token-a")
	b := httpSession(t, base+"/mcp", "token-b")

	var v any
	run(t, a, `return [await support__parcel(id="p1"), await support__parcel(id="p2-note")]`, &v)
	if info := getToolInfo(t, a, "support__parcel"); info.OutputType.Source != "none" || info.OutputType.Samples != 2 ||
		!strings.Contains(info.PythonStub, "async def support__parcel(*, id: str) -> Any:") {
		t.Errorf("after two results: %+v\n%s", info.OutputType, info.PythonStub)
	}
	if res := call(t, a, "support__parcel", map[string]any{"id": "p3"}); res.IsError {
		t.Fatalf("direct call: %v", texts(res))
	}
	info := getToolInfo(t, a, "support__parcel")
	if info.OutputType.Source != "observed" || info.OutputType.Samples != 3 || len(info.OutputType.Drift) != 0 {
		t.Errorf("after three results: %+v", info.OutputType)
	}
	for _, w := range []string{
		"# the return type is observed, not declared: the shape of the 3 results seen\nasync def support__parcel(*, id: str) -> SupportParcelResult:",
		"class SupportParcelResult(TypedDict):\n    id: str\n    items: list[SupportParcelResultItemsItem]\n    total: int\n    note: NotRequired[str]\n",
		"class SupportParcelResultItemsItem(TypedDict):\n    qty: int\n    sku: str\n",
	} {
		if !strings.Contains(info.PythonStub, w) {
			t.Errorf("the stub lacks %q:\n%s", w, info.PythonStub)
		}
	}
	typeCheck(t, map[string]string{"support__parcel": info.PythonStub})

	// The other tenant's view of the same tool: nothing seen, nothing said.
	if other := getToolInfo(t, b, "support__parcel"); other.OutputType.Source != "none" || other.OutputType.Samples != 0 ||
		strings.Contains(other.PythonStub, "SupportParcelResult") {
		t.Errorf("tenant b sees tenant a's observations: %+v\n%s", other.OutputType, other.PythonStub)
	}

	// A changed shape: drift, in the host's get_tool_info and in a program's.
	var drift struct {
		Source  string   `json:"source"`
		Samples int      `json:"samples"`
		Drift   []string `json:"drift"`
	}
	run(t, a, `await support__parcel(id="v2-1")
return (await get_tool_info("support__parcel"))["output_type"]`, &drift)
	want := "result 4: result.currency is a new key; result.total: str, where earlier results had int"
	if drift.Source != "observed" || drift.Samples != 4 || len(drift.Drift) != 1 || drift.Drift[0] != want {
		t.Errorf("a program's get_tool_info after a changed shape: %+v, want drift %q", drift, want)
	}
	info = getToolInfo(t, a, "support__parcel")
	if len(info.OutputType.Drift) != 1 || !strings.Contains(info.PythonStub, "    total: str | int\n") ||
		!strings.Contains(info.PythonStub, "    currency: NotRequired[str]\n") {
		t.Errorf("the host's get_tool_info after a changed shape: %+v\n%s", info.OutputType, info.PythonStub)
	}
	typeCheck(t, map[string]string{"support__parcel": info.PythonStub})
	if other := getToolInfo(t, b, "support__parcel"); other.OutputType.Samples != 0 || len(other.OutputType.Drift) != 0 {
		t.Errorf("tenant b sees tenant a's drift: %+v", other.OutputType)
	}
}

// observedConfig is TestObservedReturnType's config with storage (the config's first lines)
// in place of its data dir: tenants a and b, both granted the mock as a stdio upstream.
func observedConfig(t *testing.T, storage string) string {
	return testkit.WriteConfig(t, storage+`
`+processProfile+`    hard_limits: {wall_seconds: 60}
`+fmt.Sprintf(`upstreams:
  support: {command: [%[1]q]}
tenants:
  a:
    tokens: [%[2]q]
    upstreams: [support]
    agents: {default: {expose_upstream_tools: true, code_execution: {limits: {wall_seconds: 60}}}}
  b:
    tokens: [%[3]q]
    upstreams: [support]
    agents: {default: {expose_upstream_tools: true, code_execution: {limits: {wall_seconds: 60}}}}
`, built.mock, configs.HashToken("token-a"), configs.HashToken("token-b")))
}

// stopReplica interrupts r (a graceful stop, as a restart's) and waits for it to exit.
func stopReplica(t *testing.T, r *replica) {
	t.Helper()
	r.cmd.Process.Signal(os.Interrupt)
	select {
	case <-r.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s did not stop:\n%s", r.name, r.log)
	}
}

// wantObserved fails t unless info says the mock's parcel type is observed from samples
// results, with the stub TestObservedReturnType expects.
func wantObserved(t *testing.T, who string, info toolInfo, samples int) {
	t.Helper()
	if info.OutputType.Source != "observed" || info.OutputType.Samples != samples || len(info.OutputType.Drift) != 0 {
		t.Errorf("%s: %+v, want observed from %d results", who, info.OutputType, samples)
	}
	for _, w := range []string{
		fmt.Sprintf("# the return type is observed, not declared: the shape of the %d results seen\nasync def support__parcel(*, id: str) -> SupportParcelResult:", samples),
		"class SupportParcelResult(TypedDict):\n    id: str\n    items: list[SupportParcelResultItemsItem]\n    total: int\n    note: NotRequired[str]\n",
	} {
		if !strings.Contains(info.PythonStub, w) {
			t.Errorf("%s: the stub lacks %q:\n%s", who, w, info.PythonStub)
		}
	}
}

// TestObservedTypeSurvivesRestart (issue 29): the observed type is recorded in the ledger.
// Three results seen by a server (no get_tool_info asked before it stops) are its observed
// type, from 3 samples, after it restarts on the same data dir; the other tenant still sees
// nothing.
func TestObservedTypeSurvivesRestart(t *testing.T) {
	cfg := observedConfig(t, fmt.Sprintf("data_dir: %q", filepath.Join(t.TempDir(), "data")))
	first := startReplica(t, "first", cfg, "")
	a := httpSession(t, "http://"+first.addr+"/mcp", "token-a")
	var v any
	run(t, a, `return [await support__parcel(id="p1"), await support__parcel(id="p2-note")]`, &v)
	if res := call(t, a, "support__parcel", map[string]any{"id": "p3"}); res.IsError {
		t.Fatalf("direct call: %v", texts(res))
	}
	a.Close()
	stopReplica(t, first)

	second := startReplica(t, "second", cfg, "")
	a = httpSession(t, "http://"+second.addr+"/mcp", "token-a")
	info := getToolInfo(t, a, "support__parcel")
	wantObserved(t, "after a restart", info, 3)
	typeCheck(t, map[string]string{"support__parcel": info.PythonStub})
	b := httpSession(t, "http://"+second.addr+"/mcp", "token-b")
	if other := getToolInfo(t, b, "support__parcel"); other.OutputType.Source != "none" || other.OutputType.Samples != 0 {
		t.Errorf("tenant b sees tenant a's kept observations: %+v", other.OutputType)
	}
}

// TestObservedTypeSharedByReplicas (issue 29): two servers on one PostgreSQL ledger add up
// their samples: two results seen by one and one by the other are an observed type from 3
// in both, and a changed shape seen by either is drift in both; the other tenant, served by
// the same servers, sees nothing.
func TestObservedTypeSharedByReplicas(t *testing.T) {
	dsn := pgtest.Schema(t)
	cfg := observedConfig(t, `data_dir: "-"
ledger: {postgres: {dsn: {env: MCP_SANDBOX_PG_DSN}}}
blobs:  {postgres: {dsn: {env: MCP_SANDBOX_PG_DSN}}}`)
	r1, r2 := startReplica(t, "r1", cfg, dsn), startReplica(t, "r2", cfg, dsn)
	a1 := httpSession(t, "http://"+r1.addr+"/mcp", "token-a")
	a2 := httpSession(t, "http://"+r2.addr+"/mcp", "token-a")
	b2 := httpSession(t, "http://"+r2.addr+"/mcp", "token-b")

	var v any
	run(t, a1, `return [await support__parcel(id="p1"), await support__parcel(id="p2-note")]`, &v)
	if info := getToolInfo(t, a1, "support__parcel"); info.OutputType.Source != "none" || info.OutputType.Samples != 2 {
		t.Errorf("r1 after its two results: %+v", info.OutputType)
	}
	if res := call(t, a2, "support__parcel", map[string]any{"id": "p3"}); res.IsError {
		t.Fatalf("direct call: %v", texts(res))
	}
	info2 := getToolInfo(t, a2, "support__parcel")
	wantObserved(t, "r2, after r1's two results and its one", info2, 3)
	info1 := getToolInfo(t, a1, "support__parcel")
	wantObserved(t, "r1, after its two results and r2's one", info1, 3)
	if info1.PythonStub != info2.PythonStub {
		t.Errorf("the replicas' stubs differ:\n%s\n%s", info1.PythonStub, info2.PythonStub)
	}

	var drift struct {
		Source  string   `json:"source"`
		Samples int      `json:"samples"`
		Drift   []string `json:"drift"`
	}
	run(t, a2, `await support__parcel(id="v2-1")
return (await get_tool_info("support__parcel"))["output_type"]`, &drift)
	want := "result 4: result.currency is a new key; result.total: str, where earlier results had int"
	if drift.Samples != 4 || len(drift.Drift) != 1 || drift.Drift[0] != want {
		t.Errorf("r2's program after a changed shape: %+v, want drift %q", drift, want)
	}
	if info := getToolInfo(t, a1, "support__parcel"); info.OutputType.Samples != 4 || len(info.OutputType.Drift) != 1 || info.OutputType.Drift[0] != want {
		t.Errorf("r1 after r2 saw a changed shape: %+v, want drift %q", info.OutputType, want)
	}
	if other := getToolInfo(t, b2, "support__parcel"); other.OutputType.Source != "none" || other.OutputType.Samples != 0 {
		t.Errorf("tenant b sees tenant a's observations: %+v", other.OutputType)
	}
}
