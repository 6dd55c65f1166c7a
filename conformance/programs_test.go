package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/budget/postgres"
	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/internal/pgdb/pgtest"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
	"github.com/mcp-sandbox/mcp-sandbox/programs"
)

// lookupOrder is a program an operator saves: it reaches only the read-only order tool.
const lookupOrder = `async def main(order_id: str, amount: float):
    o = await shop__order(order_id=order_id)
    return {"order": o, "asked": amount}
`

// refundOne reaches the destructive refund tool.
const refundOne = `async def main(order_id: str):
    return await shop__refund(order_id=order_id, amount=1)
`

// savedResult is what the tests read of a saved program's result.
type savedResult struct {
	Value   json.RawMessage `json:"value"`
	Program struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"program"`
	Failure *struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	} `json:"failure"`
}

// Issue 42, Must show 1 and 3: an operator saves a program with `async def main(order_id: str,
// amount: float)` (`mcp-sandbox programs save`); a host of the tenant sees saved__lookup_order
// with that input schema, read-only (it reaches only a read-only tool), and calls it directly
// and from a program; the result and the ledger name its version; a second replica on the same PostgreSQL ledger
// offers and runs it; another tenant neither sees nor calls it. A program saved through the
// operator's route that reaches a destructive tool is not read-only, and a new version
// replaces the old in the listing, which the host hears of (tools/list_changed).
func TestSavedPrograms(t *testing.T) {
	dsn := pgtest.Schema(t)
	dir := t.TempDir()
	const tokenT, tokenU, operator = "programs-tenant-t", "programs-tenant-u", "programs-operator"
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
data_dir: "-"
ledger: {postgres: {dsn: {env: MCP_SANDBOX_PG_DSN}}}
approvals: {operator_tokens: [%[4]q]}
`+processProfile+`    hard_limits: {wall_seconds: 60}
upstreams:
  shop: {command: [%[1]q, "--shop"], env: {MOCK_COUNTER_FILE: %[5]q}}
tenants:
  t:
    tokens: [%[2]q]
    upstreams: [shop]
    agents: {default: {code_execution: {limits: {wall_seconds: 60}}}}
  u:
    tokens: [%[3]q]
    upstreams: [shop]
    agents: {default: {code_execution: {limits: {wall_seconds: 60}}}}
`, built.mock, configs.HashToken(tokenT), configs.HashToken(tokenU), configs.HashToken(operator), filepath.Join(dir, "counter.json")))

	file := filepath.Join(dir, "lookup.py")
	if err := os.WriteFile(file, []byte(lookupOrder), 0o600); err != nil {
		t.Fatal(err)
	}
	save := exec.Command(built.sandbox, "programs", "save", "lookup_order", file, "--tenant", "t", "--description", "Looks an order up.", "--config", cfg)
	save.Env = append(os.Environ(), "MCP_SANDBOX_PG_DSN="+dsn)
	if out, err := save.CombinedOutput(); err != nil || !strings.Contains(string(out), programs.Version(lookupOrder)) ||
		!strings.Contains(string(out), "offered as saved__lookup_order to agent default") {
		t.Fatalf("programs save: %v\n%s", err, out)
	}

	r1, r2 := startReplica(t, "r1", cfg, dsn), startReplica(t, "r2", cfg, dsn)
	var changed atomic.Int64
	connect := func(addr, token string) *mcp.ClientSession {
		client := mcp.NewClient(&mcp.Implementation{Name: "conformance", Version: "0"}, &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed.Add(1) }})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp", HTTPClient: &http.Client{Transport: bearer{token}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	tools := func(cs *mcp.ClientSession) map[string]*mcp.Tool { return listedTools(t, cs) }
	callSaved := func(cs *mcp.ClientSession, name string, args map[string]any) (savedResult, *mcp.CallToolResult) {
		return savedCall(t, cs, name, args)
	}

	host := connect(r1.addr, tokenT)
	tl := tools(host)["saved__lookup_order"]
	if tl == nil {
		t.Fatalf("the host's tools lack saved__lookup_order: %v", tools(host))
	}
	schema, _ := json.Marshal(tl.InputSchema)
	if want := `{"additionalProperties":false,"properties":{"amount":{"type":"number"},"order_id":{"type":"string"}},"required":["order_id","amount"],"type":"object"}`; string(schema) != want {
		t.Errorf("saved__lookup_order's input schema %s, want %s", schema, want)
	}
	if tl.Annotations == nil || !tl.Annotations.ReadOnlyHint {
		t.Errorf("saved__lookup_order reaches only a read-only tool, yet is annotated %+v", tl.Annotations)
	}
	r, res := callSaved(host, "saved__lookup_order", map[string]any{"order_id": "o7", "amount": 2.5})
	if res.IsError || string(r.Value) != `{"asked":2.5,"order":{"amount":20,"order_id":"o7"}}` || r.Program.Name != "lookup_order" || r.Program.Version != programs.Version(lookupOrder) {
		t.Fatalf("saved__lookup_order: %+v (%s)", r, testkit.Text(res))
	}
	if _, res := callSaved(host, "saved__lookup_order", map[string]any{"order_id": "o7"}); !res.IsError || !strings.Contains(testkit.Text(res), "amount") {
		t.Errorf("a call without amount: %s; want it refused, naming amount", testkit.Text(res))
	}

	// list_tools names it, and get_tool_info gives its stub.
	if res := call(t, host, "list_tools", nil); !strings.Contains(testkit.Text(res), "saved__lookup_order: Looks an order up.") {
		t.Errorf("list_tools: %s", testkit.Text(res))
	}
	if res := call(t, host, "get_tool_info", map[string]any{"name": "saved__lookup_order"}); res.IsError ||
		!strings.Contains(testkit.Text(res), "async def saved__lookup_order(*, order_id: str, amount: float)") {
		t.Errorf("get_tool_info(saved__lookup_order): %s", testkit.Text(res))
	}

	// A program calls it like any binding, with keywords; a wrong keyword is refused there. Its
	// list_tools lists it as the host's does (matching a query as the tools do); a saved
	// program running, and a rehearsal, may call none, and their list_tools list none.
	var fromProgram struct {
		Value any    `json:"value"`
		Bad   string `json:"bad"`
	}
	run(t, host, `
v = await saved__lookup_order(order_id="o3", amount=4)
info = await get_tool_info("saved__lookup_order")
assert "async def saved__lookup_order(*, order_id: str, amount: float)" in info["python_stub"], info
listed = (await list_tools())["saved_programs"]
assert listed == [{"name": "saved__lookup_order", "description": "Looks an order up.", "version": "`+programs.Version(lookupOrder)+`"}], listed
assert (await list_tools(query="lookup"))["saved_programs"] == listed
for unlisted in (await list_tools(query="zebra")), (await list_tools(server="shop")):
    assert "saved_programs" not in unlisted, unlisted
try:
    await saved__lookup_order(order="o3", amount=4)
    bad = "called"
except Exception as e:
    bad = type(e).__name__ + ": " + str(e)
return {"value": v, "bad": bad}
`, &fromProgram)
	if b, _ := json.Marshal(fromProgram.Value); string(b) != `{"asked":4,"order":{"amount":20,"order_id":"o3"}}` || !strings.Contains(fromProgram.Bad, "order") {
		t.Errorf("saved__lookup_order from a program: %s, and with a wrong keyword: %s", b, fromProgram.Bad)
	}

	// The second replica offers and runs it from the shared ledger.
	other := connect(r2.addr, tokenT)
	if r, res := callSaved(other, "saved__lookup_order", map[string]any{"order_id": "o1", "amount": 1}); res.IsError || r.Program.Version != programs.Version(lookupOrder) {
		t.Errorf("saved__lookup_order on the second replica: %+v (%s)", r, testkit.Text(res))
	}
	// Another tenant neither sees nor calls it.
	stranger := connect(r1.addr, tokenU)
	for name := range tools(stranger) {
		if strings.HasPrefix(name, "saved__") {
			t.Errorf("tenant u is offered %s", name)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if res, err := stranger.CallTool(ctx, &mcp.CallToolParams{Name: "saved__lookup_order", Arguments: map[string]any{"order_id": "o1", "amount": 1}}); err == nil && !res.IsError {
		t.Errorf("tenant u called tenant t's saved program: %s", testkit.Text(res))
	}

	// Must show 3, through the operator's route: a program reaching refund is not read-only.
	put := func(name, code string) {
		body, _ := json.Marshal(map[string]string{"code": code, "description": "saved by the route"})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, "http://"+r2.addr+"/v1/programs/"+name+"?tenant=t", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+operator)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("PUT /v1/programs/%s: %s", name, resp.Status)
		}
	}
	put("refund_one", refundOne)
	put("lister", "async def main():\n    return await list_tools()\n")
	if r, res := callSaved(host, "saved__lister", map[string]any{}); res.IsError || !strings.Contains(string(r.Value), "shop__refund") || strings.Contains(string(r.Value), "saved_programs") {
		t.Errorf("a saved program's list_tools: %s; want the tools, no saved programs", testkit.Text(res))
	}
	if r := rehearse(t, host, "return await list_tools()"); strings.Contains(string(r.Value), "saved_programs") || !strings.Contains(string(r.Value), "shop__refund") {
		t.Errorf("a rehearsal's list_tools: %s; want the tools, no saved programs", r.Value)
	}
	before := changed.Load()
	if tl := tools(host)["saved__refund_one"]; tl == nil || tl.Annotations == nil || tl.Annotations.ReadOnlyHint {
		t.Errorf("saved__refund_one reaches a destructive tool: want it listed, not read-only: %+v", tl)
	}
	// A new version of lookup_order replaces the old: the listing says so, and the host hears.
	put("lookup_order", lookupOrder+"# v2\n")
	if tl := tools(host)["saved__lookup_order"]; tl == nil || !strings.Contains(tl.Description, programs.Version(lookupOrder+"# v2\n")) {
		t.Errorf("after a new version, saved__lookup_order is listed as %+v", tl)
	}
	if r, _ := callSaved(host, "saved__lookup_order", map[string]any{"order_id": "o1", "amount": 1}); r.Program.Version != programs.Version(lookupOrder+"# v2\n") {
		t.Errorf("after a new version, a call ran %+v", r.Program)
	}
	deadline := time.Now().Add(30 * time.Second)
	for changed.Load() == before && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if changed.Load() == before {
		t.Error("the host heard no tools/list_changed when a saved program was added and replaced")
	}

	// The ledger names the version each execution ran.
	led, err := postgres.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	runs, err := led.ProgramRuns(ctx, "t", "lookup_order")
	if err != nil || len(runs) != 4 || runs[0].Version != programs.Version(lookupOrder) || runs[2].Version != programs.Version(lookupOrder) ||
		runs[3].Version != programs.Version(lookupOrder+"# v2\n") {
		t.Errorf("ledger program runs %+v, %v", runs, err)
	}

	// The operator's command lists, shows and deletes; a deleted program leaves the listing.
	cli := func(args ...string) string {
		cmd := exec.Command(built.sandbox, append([]string{"programs"}, append(args, "--tenant", "t", "--config", cfg)...)...)
		cmd.Env = append(os.Environ(), "MCP_SANDBOX_PG_DSN="+dsn)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("programs %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := cli("list"); !strings.Contains(out, "lookup_order  "+programs.Version(lookupOrder+"# v2\n")) || !strings.Contains(out, "refund_one") {
		t.Errorf("programs list:\n%s", out)
	}
	if out := cli("show", "lookup_order"); !strings.Contains(out, "runs: 4") || !strings.Contains(out, "# v2") {
		t.Errorf("programs show:\n%s", out)
	}
	cli("delete", "refund_one")
	cli("delete", "lister")
	if tl := tools(host)["saved__refund_one"]; tl != nil {
		t.Error("a deleted program is still listed")
	}
}

// Issue 42, Must show 2: the model proposes saving a program through save_program; the person
// sees its whole text. Declined, nothing is saved; accepted, it is saved and offered
// (saved__echo), and the host hears tools/list_changed; a new text proposed and accepted under
// the name is a new version, which the listing and the next call show.
func TestProposedProgram(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
data_dir: %q
`+processProfile+`    hard_limits: {wall_seconds: 60}
tenants:
  t:
    agents:
      default:
        code_execution: {limits: {wall_seconds: 60}}
        programs: {propose: true}
`, dataDir))
	p := newPerson()
	var changed atomic.Int64
	cs, _ := serveProcWith(t, cfg, testkit.NewLog(t, "server"), &mcp.ClientOptions{ElicitationHandler: p.handler,
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed.Add(1) }}, revisionElicit)
	listed := func() map[string]*mcp.Tool { return listedTools(t, cs) }
	if listed()[ToolSaveProgramName] == nil {
		t.Fatal("save_program is not offered to an agent with programs: {propose: true}")
	}
	const v1 = "async def main(word: str, times: int = 2):\n    return word * times\n"
	propose := func(code string) *mcp.CallToolResult {
		return call(t, cs, ToolSaveProgramName, map[string]any{"name": "echo", "code": code, "description": "Repeats a word."})
	}

	p.set("decline", nil)
	if res := propose(v1); !res.IsError || !strings.Contains(testkit.Text(res), "nothing was saved") {
		t.Fatalf("declined proposal: %s", testkit.Text(res))
	}
	if qs := p.questions(); len(qs) != 1 || !strings.Contains(qs[0], "Save the program echo") || !strings.Contains(qs[0], "  |     return word * times\n") {
		t.Fatalf("the person was asked %q; want the whole text once", qs)
	}
	if tl := listed()["saved__echo"]; tl != nil {
		t.Fatal("a declined proposal was saved")
	}

	p.set("accept", nil)
	before := changed.Load()
	if res := propose(v1); res.IsError || !strings.Contains(testkit.Text(res), programs.Version(v1)) {
		t.Fatalf("accepted proposal: %s", testkit.Text(res))
	}
	if tl := listed()["saved__echo"]; tl == nil || !strings.Contains(tl.Description, programs.Version(v1)) {
		t.Fatalf("after acceptance saved__echo is listed as %+v", tl)
	}
	r, res := savedCall(t, cs, "saved__echo", map[string]any{"word": "ab"})
	if string(r.Value) != `"abab"` || r.Program.Version != programs.Version(v1) {
		t.Errorf("saved__echo: %+v (%s)", r, testkit.Text(res))
	}

	const v2 = "async def main(word: str, times: int = 3):\n    return word * times\n"
	if res := propose(v2); res.IsError {
		t.Fatalf("second proposal: %s", testkit.Text(res))
	}
	if tl := listed()["saved__echo"]; tl == nil || !strings.Contains(tl.Description, programs.Version(v2)) {
		t.Errorf("after a new version saved__echo is listed as %+v", tl)
	}
	if r, _ := savedCall(t, cs, "saved__echo", map[string]any{"word": "ab"}); string(r.Value) != `"ababab"` || r.Program.Version != programs.Version(v2) {
		t.Errorf("saved__echo after a new version: %+v", r)
	}
	deadline := time.Now().Add(30 * time.Second)
	for changed.Load() < before+2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := changed.Load() - before; n < 2 {
		t.Errorf("the host heard %d tools/list_changed for a program saved and replaced, want at least 2", n)
	}
}

// ToolSaveProgramName is the built-in a model proposes saving a program through.
const ToolSaveProgramName = "save_program"

// savedCall calls a saved program's tool and reads its result.
func savedCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (savedResult, *mcp.CallToolResult) {
	t.Helper()
	res := call(t, cs, name, args)
	var r savedResult
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &r)
	return r, res
}

// listedTools is what tools/list offers cs, by name.
func listedTools(t *testing.T, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		out[tl.Name] = tl
	}
	return out
}
