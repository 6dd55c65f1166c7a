package conformance

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// agent is a running a2a-agent.mjs.
type agent struct {
	url  string
	stop func() // ends the agent and waits for it; idempotent
}

// a2aAgent starts a2a-agent.mjs, an agent built with @a2a-js/sdk, on 127.0.0.1 with env
// added to ours. The agent exits when its stdin closes: at stop, or at the end of the test.
func a2aAgent(t *testing.T, env ...string) *agent {
	t.Helper()
	node := nodeFor(t, "@a2a-js/sdk", filepath.Join("node_modules", "@a2a-js", "sdk", "package.json"))
	url, stop := nodeListener(t, "the A2A agent", node, "a2a-agent.mjs", env...)
	return &agent{url: url, stop: stop}
}

// nodeListener starts a node script that prints "listening <port>" once it listens on
// 127.0.0.1, with env added to ours and its stderr in the test log, and returns its URL and a
// stop that closes its stdin (the script exits then) and waits for it; stop is idempotent and
// runs at the end of the test too.
func nodeListener(t *testing.T, name, node, script string, env ...string) (url string, stop func()) {
	t.Helper()
	cmd := exec.Command(node, script)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = testkit.NewLog(t, strings.TrimSuffix(script, ".mjs"))
	stdin, stdout := testkit.StartPiped(t, cmd)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			stdin.Close()
			waitOrKill(cmd, 10*time.Second)
		})
	}
	t.Cleanup(stop)
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(io.LimitReader(stdout, 256)).ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		port, ok := strings.CutPrefix(strings.TrimSpace(l), "listening ")
		if !ok {
			t.Fatalf("%s said %q instead of its port", name, l)
		}
		return "http://127.0.0.1:" + port, stop
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not listen within 30s", name)
	}
	return "", stop
}

// a2aConfig is tenant t with the mock as upstream "support" (counting into dir/support.json)
// and the agent at url as A2A peer "inv" (deferred when asked), the bearer taken from
// MCP_SANDBOX_TEST_A2A_TOKEN; policy and budget are YAML flow mappings.
func a2aConfig(dir, url string, deferred bool, policy, budget string) string {
	return fmt.Sprintf(`
data_dir: %q
`+processProfile+`    hard_limits: {wall_seconds: 60}
    binding_budget: %s
upstreams:
  support: {command: [%q], env: {MOCK_COUNTER_FILE: %q}}
  inv:
    a2a: {url: %q, bearer: {env: MCP_SANDBOX_TEST_A2A_TOKEN}}
    deferred: %v
tenants:
  t:
    upstreams: [support, inv]
    policy: %s
    agents:
      default:
        expose_upstream_tools: true
        code_execution: {limits: {wall_seconds: 60}}
`, filepath.Join(dir, "data"), budget, built.mock, filepath.Join(dir, "support.json"), url, deferred, policy)
}

// TestA2ASkillJoinsMCPTool: one program calls a skill of a real A2A agent (@a2a-js/sdk) and
// a tool of an MCP server and joins the answers; the skills are found and described like
// tools; the ledger records every call; the credential reaches the agent and nothing else.
func TestA2ASkillJoinsMCPTool(t *testing.T) {
	dir := t.TempDir()
	const token = "a2a-s3cret-token"
	url := a2aAgent(t, "A2A_AGENT_TOKEN="+token, "A2A_AGENT_COUNTER="+filepath.Join(dir, "agent.json")).url
	t.Setenv("MCP_SANDBOX_TEST_A2A_TOKEN", token)
	log := testkit.NewLog(t, "server")
	cs, _ := serveProc(t, testkit.WriteConfig(t, a2aConfig(dir, url, true, "{}", "{}")), log)

	var got struct {
		Joined  map[string]any   `json:"joined"`
		Echo    string           `json:"echo"`
		Report  []map[string]any `json:"report"`
		Schema  map[string]any   `json:"schema"`
		Listed  []string         `json:"listed"`
		Problem string           `json:"problem"`
		Tools   []string         `json:"tools"`
	}
	run(t, cs, `
stock = await inv__stock(data={"sku": "A"})
product = await support__lookup(sku="A")
echo = await call_tool("inv__echo", {"text": "quiet please"})
report = await inv__report(text="q3")
info = await get_tool_info("inv__stock")
listed = await list_tools(server="inv")
return {
    "joined": {"sku": stock["sku"], "in_stock": stock["in_stock"], "name": product["name"], "price": product["price"]},
    "echo": echo, "report": report, "schema": info["input_schema"],
    "listed": [t["name"] for t in listed["tools"]],
    "problem": listed.get("problems", {}).get("inv", ""),
    "tools": [n for n in TOOLS if n.startswith("inv__")],
}
`, &got)
	if d := cmp.Diff(map[string]any{"sku": "A", "in_stock": 7.0, "name": "Product A", "price": 11.0}, got.Joined); d != "" {
		t.Errorf("joined answer (-want +got):\n%s", d)
	}
	if got.Echo != "QUIET PLEASE" {
		t.Errorf("echo = %q", got.Echo)
	}
	wantReport := []map[string]any{
		{"type": "text", "text": "report for q3"},
		{"type": "data", "data": map[string]any{"lines": 2.0, "ok": true}},
		{"type": "resource", "resource": map[string]any{"uri": "a2a:file/r.csv", "mimeType": "text/csv", "blob": "Y29sCjEK"}},
	}
	if d := cmp.Diff(wantReport, got.Report); d != "" {
		t.Errorf("report (-want +got):\n%s", d)
	}
	skills := []string{"inv__ask", "inv__big", "inv__echo", "inv__fail", "inv__refund", "inv__report", "inv__slow", "inv__stock"}
	if d := cmp.Diff(skills, got.Tools); d != "" {
		t.Errorf("TOOLS (-want +got):\n%s", d)
	}
	if d := cmp.Diff(skills, got.Listed); d != "" {
		t.Errorf("list_tools (-want +got):\n%s", d)
	}
	if props, _ := got.Schema["properties"].(map[string]any); props["text"] == nil || props["data"] == nil {
		t.Errorf("input schema %v", got.Schema)
	}
	host := hostTools(t, cs)
	if host["inv__stock"] || !host["support__lookup"] {
		t.Errorf("a deferred peer's skills are offered to the host, or the mock's are not: %v", host)
	}

	calls := ledgerCalls(t, filepath.Join(dir, "data"))
	want := []ledgerCall{
		{"inv__stock", "succeeded", ""}, {"support__lookup", "succeeded", ""},
		{"inv__echo", "succeeded", ""}, {"inv__report", "succeeded", ""},
		// Built-ins called from a program are calls too, recorded under their own names.
		{"get_tool_info", "succeeded", ""}, {"list_tools", "succeeded", ""},
	}
	if d := cmp.Diff(want, calls); d != "" {
		t.Errorf("ledger tool_calls (-want +got):\n%s", d)
	}
	stderr := log.String()
	if !strings.Contains(got.Problem, "skipped 2 tools whose names break the MCP rules") || !strings.Contains(got.Problem, `"bad name"`) {
		t.Errorf("list_tools does not say the skills with bad names were skipped: %q", got.Problem)
	}
	if strings.Contains(stderr, token) {
		t.Errorf("the credential was logged")
	}
}

// TestA2APolicyAppliesToSkills: deny, approval and the call budget treat a skill exactly as a
// tool; refused calls never reach the agent; a skill needing approval is callable directly.
func TestA2APolicyAppliesToSkills(t *testing.T) {
	dir := t.TempDir()
	agentCounter := filepath.Join(dir, "agent.json")
	url := a2aAgent(t, "A2A_AGENT_COUNTER="+agentCounter).url
	t.Setenv("MCP_SANDBOX_TEST_A2A_TOKEN", "unused-by-this-agent")
	policy := `{deny: ["inv__fail", "support__add"], approval_required: ["inv__refund", "support__lookup"]}`
	cs, _ := serveProc(t, testkit.WriteConfig(t, a2aConfig(dir, url, false, policy, "{max_calls: 2}")), testkit.NewLog(t, "server"))

	var got map[string]any
	run(t, cs, `
out = {"tools": [n for n in TOOLS if n in ("inv__fail", "support__add", "inv__refund", "support__lookup")]}
for name, args in [("inv__fail", {"text": "x"}), ("support__add", {"a": 1, "b": 2}),
                   ("inv__refund", {"data": {"order": "o-1"}}), ("support__lookup", {"sku": "A"}),
                   ("support__class", {}), ("inv__echo", {"text": "hi"}),
                   ("inv__echo", {"text": "again"}), ("support__class", {})]:
    try:
        await call_tool(name, args)
        r = "ok"
    except ToolError as e:
        r = e.kind
    out.setdefault(name, []).append(r)
return out
`, &got)
	want := map[string]any{
		"tools":           []any{"inv__refund", "support__lookup"},
		"inv__fail":       []any{"denied"},
		"support__add":    []any{"denied"},
		"inv__refund":     []any{"approval_required_in_program"},
		"support__lookup": []any{"approval_required_in_program"},
		"support__class":  []any{"ok", "budget_exceeded"},
		"inv__echo":       []any{"ok", "budget_exceeded"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("refusals (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]int{"echo": 1}, counts(t, agentCounter)); d != "" {
		t.Errorf("skills the agent really ran (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]int{"class": 1}, counts(t, filepath.Join(dir, "support.json"))); d != "" {
		t.Errorf("tools the mock really ran (-want +got):\n%s", d)
	}
	calls := ledgerCalls(t, filepath.Join(dir, "data"))
	wantCalls := []ledgerCall{
		{"support__class", "succeeded", ""}, {"inv__echo", "succeeded", ""},
		{"inv__echo", "refused", "budget_exceeded"}, {"support__class", "refused", "budget_exceeded"},
	}
	if d := cmp.Diff(wantCalls, calls); d != "" {
		t.Errorf("ledger tool_calls (-want +got):\n%s", d)
	}

	// The host is offered the skill that needs approval, the denied one is not, as a denied
	// tool is not. A direct call needs the person's approval too, and this host (a go-sdk
	// client of 2026-07-28) cannot be asked: refused, never run (approvals_test.go asks a host
	// that can).
	if host := hostTools(t, cs); host["inv__fail"] || host["support__add"] || !host["inv__refund"] || !host["inv__echo"] {
		t.Errorf("host tools %v", host)
	}
	if res := call(t, cs, "inv__refund", map[string]any{"data": map[string]any{"order": "o-1"}}); !res.IsError ||
		!strings.Contains(testkit.Text(res), "approval_required_in_program") {
		t.Errorf("direct inv__refund: %v %s", res.IsError, testkit.Text(res))
	}
	if d := cmp.Diff(map[string]int{"echo": 1}, counts(t, agentCounter)); d != "" {
		t.Errorf("skills the agent really ran (-want +got):\n%s", d)
	}
}

// TestA2AAgentAnswers: the agent's failures reach the program as a tool's do (tool_error
// with its words); a large answer is paged like a large tool result; a task that outlives
// the program is cancelled on the agent; an agent that is gone is upstream_error.
func TestA2AAgentAnswers(t *testing.T) {
	dir := t.TempDir()
	agentCounter := filepath.Join(dir, "agent.json")
	ag := a2aAgent(t, "A2A_AGENT_COUNTER="+agentCounter)
	t.Setenv("MCP_SANDBOX_TEST_A2A_TOKEN", "unused-by-this-agent")
	cs, _ := serveProc(t, testkit.WriteConfig(t, a2aConfig(dir, ag.url, true, "{}", "{max_result_bytes: 64KiB}")), testkit.NewLog(t, "server"))

	var got map[string]any
	run(t, cs, `
out = {}
for name, args in [("inv__fail", {"text": "x"}), ("inv__ask", {"text": "x"}), ("inv__stock", {"data": {"sku": "Z"}})]:
    try:
        await call_tool(name, args)
    except ToolError as e:
        out[name] = [e.kind, str(e)]
big = await inv__big(data={"n": 200000})
page = await big.read(offset=1000, limit=2)
out["big"] = [type(big).__name__, page]
return out
`, &got)
	for name, words := range map[string]string{"inv__fail": "the fail skill failed, as asked", "inv__ask": "which order?", "inv__stock": `unknown SKU "Z"`} {
		r, _ := got[name].([]any)
		if len(r) != 2 || r[0] != "tool_error" || !strings.Contains(fmt.Sprint(r[1]), words) {
			t.Errorf("%s: %v, want tool_error with %q", name, got[name], words)
		}
	}
	if b, _ := got["big"].([]any); len(b) != 2 || b[0] != "ToolResultHandle" || !strings.Contains(fmt.Sprint(b[1]), strings.Repeat("y", 99)) {
		t.Errorf("big answer: %.300v", got["big"])
	}

	// A program cancelled by its host during a long task: the task is cancelled on the agent.
	before := counts(t, agentCounter)["(cancel)"]
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{
			"code": `await inv__slow(data={"seconds": 30})`}})
		done <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for counts(t, agentCounter)["slow"] == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the slow skill never started")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done
	for counts(t, agentCounter)["(cancel)"] == before && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if counts(t, agentCounter)["(cancel)"] == before {
		t.Errorf("the long task was not cancelled on the agent: %v", counts(t, agentCounter))
	}

	// An agent that is gone: upstream_error, and the call was not made.
	ag.stop()
	var kind string
	run(t, cs, `
try:
    await inv__echo(text="anyone?")
    return "ok"
except ToolError as e:
    return e.kind
`, &kind)
	if kind != "upstream_error" {
		t.Errorf("a call to a stopped agent: %q, want upstream_error", kind)
	}
}

// TestA2ASkillApprovedByAPerson: a skill that needs approval is asked of a person, as a tool
// is: accepted, the agent runs it once and the program gets its answer; declined, the agent
// never runs it and the program hears denied; the ledger keeps both decisions.
func TestA2ASkillApprovedByAPerson(t *testing.T) {
	dir := t.TempDir()
	agentCounter := filepath.Join(dir, "agent.json")
	url := a2aAgent(t, "A2A_AGENT_COUNTER="+agentCounter).url
	t.Setenv("MCP_SANDBOX_TEST_A2A_TOKEN", "unused-by-this-agent")
	cfg := testkit.WriteConfig(t, a2aConfig(dir, url, false, `{approval_required: ["inv__echo"]}`, "{}"))
	cs, p, _ := servePerson(t, cfg)
	const program = `
try:
    r = {"answer": await inv__echo(text="approved words")}
except ToolError as e:
    r = {"kind": e.kind}
return r
`
	var full approvalResult
	p.set("accept", nil)
	var accepted map[string]any
	runInto(t, cs, "", program, &accepted, &full)
	if !strings.Contains(strings.ToLower(fmt.Sprint(accepted["answer"])), "approved words") || full.Approvals.Accepted != 1 {
		t.Errorf("accepted: %v, approvals %+v", accepted, full.Approvals)
	}
	if d := cmp.Diff(map[string]int{"echo": 1}, counts(t, agentCounter)); d != "" {
		t.Errorf("accepted: skills the agent really ran (-want +got):\n%s", d)
	}
	p.set("decline", nil)
	var declined map[string]any
	runInto(t, cs, "", program, &declined, &full)
	if declined["kind"] != "denied" || full.Approvals.Declined != 1 {
		t.Errorf("declined: %v, approvals %+v", declined, full.Approvals)
	}
	if d := cmp.Diff(map[string]int{"echo": 1}, counts(t, agentCounter)); d != "" {
		t.Errorf("declined: skills the agent really ran (-want +got):\n%s", d)
	}
	if q := p.questions(); len(q) != 2 || !strings.Contains(q[0], "inv__echo") {
		t.Errorf("the person was asked %q, want two questions naming inv__echo", q)
	}
}

// TestA2AVersionsSideBySide (issue 30, must show 4): an agent on A2A 1.0 only (@a2a-js/sdk
// with its legacy layer off, its default) and one on 0.3 (the layer on, its card listing only
// a 0.3 interface) are both callable from one program, each in its own protocol; their
// answers reach the program alike, and the ledger records every call.
func TestA2AVersionsSideBySide(t *testing.T) {
	dir := t.TempDir()
	methods := map[string]string{"new": filepath.Join(dir, "new-methods.json"), "old": filepath.Join(dir, "old-methods.json")}
	newURL := a2aAgent(t, "A2A_AGENT_PROTOCOL=1.0", "A2A_AGENT_TOKEN=new-s3cret", "A2A_AGENT_METHODS="+methods["new"]).url
	oldURL := a2aAgent(t, "A2A_AGENT_PROTOCOL=0.3", "A2A_AGENT_TOKEN=old-s3cret", "A2A_AGENT_METHODS="+methods["old"]).url
	t.Setenv("MCP_SANDBOX_TEST_A2A_NEW", "new-s3cret")
	t.Setenv("MCP_SANDBOX_TEST_A2A_OLD", "old-s3cret")
	log := testkit.NewLog(t, "server")
	cs, _ := serveProc(t, testkit.WriteConfig(t, fmt.Sprintf(`
data_dir: %q
`+processProfile+`    hard_limits: {wall_seconds: 60}
upstreams:
  new: {a2a: {url: %q, bearer: {env: MCP_SANDBOX_TEST_A2A_NEW}}}
  old: {a2a: {url: %q, bearer: {env: MCP_SANDBOX_TEST_A2A_OLD}}}
tenants:
  t:
    upstreams: [new, old]
    policy: {deny: ["old__refund"]}
    agents:
      default:
        code_execution: {limits: {wall_seconds: 60}}
`, filepath.Join(dir, "data"), newURL, oldURL)), log)

	var got map[string]any
	run(t, cs, `
out = {"problems": (await list_tools()).get("problems", {})}
for server in ("new", "old"):
    r = {}
    r["stock"] = await call_tool(server + "__stock", {"data": {"sku": "C"}})
    r["echo"] = await call_tool(server + "__echo", {"text": "both ways"})
    r["report"] = await call_tool(server + "__report", {"text": server})
    for name, args in [("fail", {"text": "x"}), ("ask", {"text": "x"}), ("refund", {"text": "o-1"})]:
        try:
            await call_tool(server + "__" + name, args)
        except ToolError as e:
            r[name] = e.kind
    out[server] = r
return out
`, &got)
	if p, _ := got["problems"].(map[string]any); p["new"] != nil || p["old"] != nil {
		// The bad skill names are said; nothing else may be.
		for _, s := range []any{p["new"], p["old"]} {
			if !strings.HasPrefix(fmt.Sprint(s), "skipped 2 tools whose names break the MCP rules") {
				t.Errorf("problems: %v", p)
			}
		}
	}
	report := func(who string) []any {
		return []any{
			map[string]any{"type": "text", "text": "report for " + who},
			map[string]any{"type": "data", "data": map[string]any{"lines": 2.0, "ok": true}},
			map[string]any{"type": "resource", "resource": map[string]any{"uri": "a2a:file/r.csv", "mimeType": "text/csv", "blob": "Y29sCjEK"}},
		}
	}
	for _, who := range []string{"new", "old"} {
		want := map[string]any{
			"stock": map[string]any{"sku": "C", "in_stock": 12.0}, "echo": "BOTH WAYS", "report": report(who),
			"fail": "tool_error", "ask": "tool_error",
		}
		if who == "old" {
			want["refund"] = "denied"
		}
		if d := cmp.Diff(want, got[who]); d != "" {
			t.Errorf("%s (-want +got):\n%s", who, d)
		}
	}

	// Each agent was spoken to in its own version, by its own method names.
	wantMethods := map[string]map[string]int{
		"new": {"1.0 SendMessage": 6, "1.0 CancelTask": 1},
		"old": {"0.3 message/send": 5, "0.3 tasks/cancel": 1},
	}
	for who, want := range wantMethods {
		got := counts(t, methods[who])
		for m := range got {
			if strings.HasSuffix(m, "GetTask") || strings.HasSuffix(m, "tasks/get") {
				delete(got, m) // polls: as many as the timing makes
			}
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: JSON-RPC requests (-want +got):\n%s", who, d)
		}
	}

	calls := ledgerCalls(t, filepath.Join(dir, "data"))
	var want []ledgerCall
	for _, who := range []string{"new", "old"} {
		want = append(want, ledgerCall{who + "__stock", "succeeded", ""}, ledgerCall{who + "__echo", "succeeded", ""},
			ledgerCall{who + "__report", "succeeded", ""}, ledgerCall{who + "__fail", "failed", "tool_error"},
			ledgerCall{who + "__ask", "failed", "tool_error"})
		if who == "new" { // old__refund is denied: not in the turn, so no call to record
			want = append(want, ledgerCall{"new__refund", "succeeded", ""})
		}
	}
	want = append([]ledgerCall{{"list_tools", "succeeded", ""}}, want...)
	if d := cmp.Diff(want, calls); d != "" {
		t.Errorf("ledger tool_calls (-want +got):\n%s", d)
	}
	s := log.String()
	if strings.Contains(s, "new-s3cret") || strings.Contains(s, "old-s3cret") {
		t.Errorf("a credential was logged")
	}
	// The operator reads which version each agent is spoken to in.
	for _, want := range []string{"server=new protocol=1.0", "server=old protocol=0.3"} {
		if !strings.Contains(s, want) {
			t.Errorf("the server's log does not say %q", want)
		}
	}
}
