//go:build linux

package benchmarks

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// What the model reads is counted the same way on both sides, from what an MCP client
// receives and sends: the JSON of the tool definitions listed (tools/list's tools), of each
// request (tools/call's name and arguments) and of each result (the whole CallToolResult:
// content, structuredContent, isError). The model's own reasoning and its final answer are
// the same both ways and not counted. Tokens are approximated as bytes/4, rounded up: a fixed
// rule, so the two sides compare; a real tokenizer would move both alike.

// modelView adds up what a model reads: what enters its context (definitions, requests,
// results, once each), and, as a second figure, what it reads turn by turn when each call is a
// turn of its own that reads the whole context so far, as an API bills input (plus a last
// turn that answers).
type modelView struct {
	defs, requests, results int
	calls                   int
	perTurn                 int
}

func (v *modelView) list(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	var cursor string
	for {
		res, err := cs.ListTools(context.Background(), &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(res.Tools)
		v.defs += len(b)
		if cursor = res.NextCursor; cursor == "" {
			return
		}
	}
}

func (v *modelView) call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	req, _ := json.Marshal(p)
	res, err := cs.CallTool(context.Background(), p)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: %s", name, testkit.Text(res))
	}
	out, _ := json.Marshal(res)
	v.perTurn += v.bytes() // the turn that made this call read everything before it
	v.requests += len(req)
	v.results += len(out)
	v.calls++
	return res
}

func (v *modelView) bytes() int { return v.defs + v.requests + v.results }

// turns is the per-turn figure, the answering turn included.
func (v *modelView) turns() int { return v.perTurn + v.bytes() }

func tokens(n int) int { return (n + 3) / 4 }

// contextConfig serves agent "model" of tenant t: run_code and the built-ins only (no
// upstream tool is exposed directly: the program reaches them), granted the mock as
// "support", "docs" and "crm", and the 351-tool mock as the deferred "big".
func contextConfig(t *testing.T, mock string) string {
	t.Helper()
	return testkit.WriteConfig(t, fmt.Sprintf(`
data_dir: %q
`+benchProfile+`upstreams:
  support: {command: [%[2]q]}
  big:     {command: [%[2]q, "--many", "351", "--page-size", "40"], deferred: true}
  docs:    {command: [%[2]q]}
  crm:     {command: [%[2]q]}
tenants:
  t:
    upstreams: [support, big, docs, crm]
    agents:
      model:
        expose_upstream_tools: false
        code_execution: {}
`, t.TempDir(), mock))
}

// The five tools scenario B asks for, among the deferred server's 351.
var scenarioBTools = []int{17, 42, 99, 256, 347}

// TestReportContext prints what the model reads for two tasks, done as the direct MCP tool
// calls a model would make and as one run_code: bytes and approximate tokens both ways, and
// the reduction.
//
// Scenario A: look up 40 SKUs and join their names into one answer (the mock's lookup).
// Directly: the server's tools listed, then 40 calls, each request and result read. With
// run_code: mcp-sandbox's tools listed, the tool found and described (list_tools,
// get_tool_info), then one program that loops and joins.
//
// Scenario B: a deferred server of 351 tools; find the five the task names, call each, and
// combine their answers. Directly: all 351 definitions listed (a server's tools are all
// listed to a model that connects to it), then five calls. With run_code: mcp-sandbox's tools
// listed (the deferred server stays out of them), one list_tools to learn the tools' naming,
// one get_tool_info for their arguments, and one program that finds the five in TOOLS, calls
// them and combines.
//
// Scenario C: the "copy a transcript into a CRM" task: a 50 KB document read from one server
// and written into a record of another. Directly: both servers' tools listed, the document
// read (its result) and sent back whole (the record's request). With run_code: mcp-sandbox's
// tools listed and one program of two calls; the document never enters the model's context.
// The report also gives the reduction with the definitions listed left out: what the task
// itself costs, beside the fixed cost of listing the tools.
func TestReportContext(t *testing.T) {
	sandbox, mock := testkit.Binary(t), testkit.MockUpstream(t)
	host := connect(t, exec.Command(sandbox, "serve", "--config", contextConfig(t, mock), "--agent", "model"))

	type scenario struct {
		name           string
		direct, viaRun modelView
		taskOnly       bool // report the reduction without the definitions listed too
	}
	var out []scenario

	// Scenario A, directly.
	a := scenario{name: "A: 40 lookups joined into one answer"}
	support := connect(t, exec.Command(mock))
	a.direct.list(t, support)
	var names []string
	for i := range 40 {
		res := a.direct.call(t, support, "lookup", map[string]any{"sku": fmt.Sprintf("S%d", i)})
		var v struct{ Name string }
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &v)
		names = append(names, v.Name)
	}
	directA := strings.Join(names, ", ")
	// Scenario A, with run_code.
	a.viaRun.list(t, host)
	a.viaRun.call(t, host, "list_tools", map[string]any{"server": "support", "query": "lookup"})
	a.viaRun.call(t, host, "get_tool_info", map[string]any{"name": "support__lookup"})
	res := a.viaRun.call(t, host, "run_code", map[string]any{"code": `names = []
for i in range(40):
    r = await support__lookup(sku=f"S{i}")
    names.append(r["name"])
", ".join(names)`})
	if got := testkit.Text(res); !strings.Contains(got, directA) {
		t.Fatalf("run_code's answer differs from the direct one:\n%s\nwant %s", got, directA)
	}
	out = append(out, a)

	// Scenario B, directly.
	b := scenario{name: "B: 5 of a deferred server's 351 tools, combined"}
	big := connect(t, exec.Command(mock, "--many", "351", "--page-size", "40"))
	b.direct.list(t, big)
	var parts []string
	for _, n := range scenarioBTools {
		res := b.direct.call(t, big, fmt.Sprintf("tool-%04d", n), map[string]any{"q": "report"})
		parts = append(parts, testkit.Text(res))
	}
	directB := strings.Join(parts, " | ")
	// Scenario B, with run_code.
	b.viaRun.list(t, host)
	b.viaRun.call(t, host, "list_tools", map[string]any{"server": "big", "query": "number 17."})
	b.viaRun.call(t, host, "get_tool_info", map[string]any{"name": "big__tool-0017"})
	res = b.viaRun.call(t, host, "run_code", map[string]any{"code": `want = ("0017", "0042", "0099", "0256", "0347")
found = [n for n in TOOLS if n.startswith("big__tool-") and n[-4:] in want]
parts = [await call_tool(n, {"q": "report"}) for n in found]
" | ".join(parts)`})
	if got := testkit.Text(res); !strings.Contains(got, directB) {
		t.Fatalf("run_code's answer differs from the direct one:\n%s\nwant %s", got, directB)
	}
	out = append(out, b)

	// Scenario C, directly: both servers' tools listed, the transcript read (its 50 KB
	// result), then written into a record (its 50 KB request).
	c := scenario{name: "C: a 50 KB transcript read from one server, written into a record of another", taskOnly: true}
	docs, crm := connect(t, exec.Command(mock)), connect(t, exec.Command(mock))
	c.direct.list(t, docs)
	c.direct.list(t, crm)
	doc := testkit.Text(c.direct.call(t, docs, "transcript", map[string]any{"meeting": "m-42"}))
	if len(doc) < 50000 {
		t.Fatalf("the transcript is %d bytes, want 50 KB", len(doc))
	}
	rec := c.direct.call(t, crm, "create_record", map[string]any{"title": "Meeting m-42", "body": doc})
	directC, _ := json.Marshal(rec.StructuredContent)
	// Scenario C, with run_code: the model knows the two tools' names from the task; the
	// program's stubs are the binding's keywords (get_tool_info would add a few hundred bytes).
	c.viaRun.list(t, host)
	res = c.viaRun.call(t, host, "run_code", map[string]any{"code": `doc = await docs__transcript(meeting="m-42")
return await crm__create_record(title="Meeting m-42", body=doc)`})
	if got := testkit.Text(res); !strings.Contains(got, strings.ReplaceAll(string(directC), ",", ", ")) && !strings.Contains(got, string(directC)) {
		t.Fatalf("run_code's record differs from the direct one:\n%s\nwant %s", got, directC)
	}
	out = append(out, c)

	report := "what the model reads, in bytes and approximate tokens (bytes/4): tool definitions listed, every request, every result\n" +
		"(per turn: each call a turn that reads the whole context so far, and a last turn that answers)\n"
	for _, s := range out {
		d, r := s.direct.bytes(), s.viaRun.bytes()
		dt, rt := s.direct.turns(), s.viaRun.turns()
		report += fmt.Sprintf("%s\n", s.name) +
			fmt.Sprintf("  %-18s %7d bytes %6d tokens  (definitions %d, %d requests %d, results %d)  per turn %8d bytes %7d tokens\n",
				"direct tool calls", d, tokens(d), s.direct.defs, s.direct.calls, s.direct.requests, s.direct.results, dt, tokens(dt)) +
			fmt.Sprintf("  %-18s %7d bytes %6d tokens  (definitions %d, %d requests %d, results %d)  per turn %8d bytes %7d tokens\n",
				"one run_code", r, tokens(r), s.viaRun.defs, s.viaRun.calls, s.viaRun.requests, s.viaRun.results, rt, tokens(rt)) +
			fmt.Sprintf("  %-18s %6.1f %% fewer bytes with run_code; per turn %.1f %% fewer\n", "reduction",
				100*(1-float64(r)/float64(d)), 100*(1-float64(rt)/float64(dt)))
		if s.taskOnly {
			report += fmt.Sprintf("  %-18s %6.1f %% fewer bytes with run_code, the definitions listed left out (direct %d, run_code %d)\n", "task only",
				100*(1-float64(r-s.viaRun.defs)/float64(d-s.direct.defs)), d-s.direct.defs, r-s.viaRun.defs)
		}
	}
	fixed := out[0].viaRun.defs
	report += fmt.Sprintf("listing run_code and the three built-ins (tools/list, once per session): %d bytes %d tokens\n", fixed, tokens(fixed))
	t.Log(report)
	fmt.Fprintln(os.Stderr, report)
}
