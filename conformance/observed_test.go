package conformance

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
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
