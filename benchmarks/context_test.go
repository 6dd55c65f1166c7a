//go:build linux

package benchmarks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// What the model reads is counted the same way on both sides, from what an MCP client
// receives and sends: the JSON of the tool definitions listed (tools/list's tools), of each
// request (tools/call's name and arguments) and of each result's content, structuredContent
// and isError. Protocol fields a host does not hand the model are left out (a result's _meta
// and resultType, a definition's _meta: go-sdk's client adds the server's name and version to
// every result's _meta), and text is counted as the model reads it, without JSON's escaping
// of <, > and &. The model's own reasoning and its final answer are the same both ways and
// not counted. Tokens are approximated as bytes/4, rounded up: a fixed rule, so the two sides
// compare; a real tokenizer would move both alike.

// modelView adds up what a model reads: what enters its context (definitions, requests,
// results, once each), and, as a second figure, what it reads turn by turn when each call is a
// turn of its own that reads the whole context so far, as an API bills input (plus a last
// turn that answers).
type modelView struct {
	defs, requests, results int
	calls                   int
	perTurn                 int
}

// visible is the length of v's JSON as the model reads it: without the keys in drop (at its
// top level) and without HTML escaping.
func visible(v any, drop ...string) int {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber() // numbers as they came
	var doc any
	if err := d.Decode(&doc); err != nil {
		panic(err)
	}
	if m, ok := doc.(map[string]any); ok {
		for _, k := range drop {
			delete(m, k)
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		panic(err)
	}
	return buf.Len() - 1 // Encode's newline
}

// list reads the server's tools as a model is given them: every one, or only those named in
// only.
func (v *modelView) list(t *testing.T, cs *mcp.ClientSession, only ...string) {
	t.Helper()
	var cursor string
	for {
		res, err := cs.ListTools(context.Background(), &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		var tools []json.RawMessage
		for _, tl := range res.Tools {
			if len(only) == 0 || slices.Contains(only, tl.Name) {
				b, _ := json.Marshal(tl)
				tools = append(tools, b)
			}
		}
		if len(tools) > 0 {
			n := 2 + len(tools) - 1 // the array's brackets and commas
			for _, b := range tools {
				n += visible(b, "_meta")
			}
			v.defs += n
		}
		if cursor = res.NextCursor; cursor == "" {
			return
		}
	}
}

func (v *modelView) call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	req := visible(p, "_meta")
	res, err := cs.CallTool(context.Background(), p)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: %s", name, testkit.Text(res))
	}
	v.perTurn += v.bytes() // the turn that made this call read everything before it
	v.requests += req
	v.results += visible(res, "_meta", "resultType")
	v.calls++
	return res
}

// add is the sum of two views, their definitions, requests and results together, as if one
// followed the other in the same context.
func (v modelView) add(w modelView) modelView {
	return modelView{defs: v.defs + w.defs, requests: v.requests + w.requests, results: v.results + w.results,
		calls: v.calls + w.calls, perTurn: v.perTurn + w.perTurn + w.calls*v.bytes()}
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

// The programs of the three scenarios, through our client and through Claude Code alike.
const (
	scenarioAProgram = `names = []
for i in range(40):
    r = await support__lookup(sku=f"S{i}")
    names.append(r["name"])
", ".join(names)`
	scenarioBProgram = `want = ("0017", "0042", "0099", "0256", "0347")
found = [n for n in TOOLS if n.startswith("big__tool-") and n[-4:] in want]
parts = [await call_tool(n, {"q": "report"}) for n in found]
" | ".join(parts)`
	scenarioCProgram = `doc = await docs__transcript(meeting="m-42")
return await crm__create_record(title="Meeting m-42", body=doc)`
)

// TestReportContext prints what the model reads for three tasks, done as the direct MCP tool
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
// and written into a record of another. It is reported twice, both sides counted alike:
//
//   - the task: what doing it costs once the model knows the tools. Directly, the document
//     read (its result) and sent back whole (the record's request); with run_code, one
//     program of two calls and its result: the document never enters the model's context.
//   - with the tools: the task and what teaches the model the two tools, once a session.
//     Directly, the definitions of the two tools used (the least a model connected to both
//     servers is given: the mock's other tools are left out); with run_code, the listing of
//     run_code and the built-ins and a get_tool_info of each tool (its keywords).
//
// A third figure is the cost a task when one session does the task ten times.
func TestReportContext(t *testing.T) {
	sandbox, mock := testkit.Binary(t), testkit.MockUpstream(t)
	host := connect(t, exec.Command(sandbox, "serve", "--config", contextConfig(t, mock), "--agent", "model"))

	type scenario struct {
		name           string
		direct, viaRun modelView
		// The task alone and what teaches the tools, when the scenario reports them apart
		// (direct and viaRun are then their sums).
		directTask, runTask, directTools, runTools *modelView
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
	res := a.viaRun.call(t, host, "run_code", map[string]any{"code": scenarioAProgram})
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
	res = b.viaRun.call(t, host, "run_code", map[string]any{"code": scenarioBProgram})
	if got := testkit.Text(res); !strings.Contains(got, directB) {
		t.Fatalf("run_code's answer differs from the direct one:\n%s\nwant %s", got, directB)
	}
	out = append(out, b)

	// Scenario C, directly: the two tools' definitions, the transcript read (its 50 KB
	// result), then written into a record (its 50 KB request).
	var directTools, directTask, runTools, runTask modelView
	docs, crm := connect(t, exec.Command(mock)), connect(t, exec.Command(mock))
	directTools.list(t, docs, "transcript")
	directTools.list(t, crm, "create_record")
	doc := testkit.Text(directTask.call(t, docs, "transcript", map[string]any{"meeting": "m-42"}))
	if len(doc) < 50000 {
		t.Fatalf("the transcript is %d bytes, want 50 KB", len(doc))
	}
	rec := directTask.call(t, crm, "create_record", map[string]any{"title": "Meeting m-42", "body": doc})
	directC, _ := json.Marshal(rec.StructuredContent)
	// Scenario C, with run_code: mcp-sandbox's tools listed, the two tools described (their
	// stubs give the keywords), then one program.
	runTools.list(t, host)
	for _, n := range []string{"docs__transcript", "crm__create_record"} {
		runTools.call(t, host, "get_tool_info", map[string]any{"name": n})
	}
	res = runTask.call(t, host, "run_code", map[string]any{"code": scenarioCProgram})
	if got := testkit.Text(res); !strings.Contains(got, strings.ReplaceAll(string(directC), ",", ", ")) && !strings.Contains(got, string(directC)) {
		t.Fatalf("run_code's record differs from the direct one:\n%s\nwant %s", got, directC)
	}
	out = append(out, scenario{name: "C: a 50 KB transcript read from one server, written into a record of another",
		direct: directTools.add(directTask), viaRun: runTools.add(runTask),
		directTask: &directTask, runTask: &runTask, directTools: &directTools, runTools: &runTools})

	report := "what the model reads, in bytes and approximate tokens (bytes/4): tool definitions listed, every request, every result\n" +
		"(per turn: each call a turn that reads the whole context so far, and a last turn that answers)\n"
	row := func(label string, v modelView) string {
		return fmt.Sprintf("  %-18s %7d bytes %6d tokens  (definitions %d, %d requests %d, results %d)  per turn %8d bytes %7d tokens\n",
			label, v.bytes(), tokens(v.bytes()), v.defs, v.calls, v.requests, v.results, v.turns(), tokens(v.turns()))
	}
	fewer := func(r, d int) float64 { return 100 * (1 - float64(r)/float64(d)) }
	for _, s := range out {
		d, r := s.direct.bytes(), s.viaRun.bytes()
		if s.directTask == nil {
			report += s.name + "\n" + row("direct tool calls", s.direct) + row("one run_code", s.viaRun) +
				fmt.Sprintf("  %-18s %6.1f %% fewer bytes with run_code; per turn %.1f %% fewer\n", "reduction",
					fewer(r, d), fewer(s.viaRun.turns(), s.direct.turns()))
			continue
		}
		dt, rt := s.directTask.bytes(), s.runTask.bytes()
		// Ten tasks a session: the tools taught once, the task done ten times.
		d10, r10 := s.directTools.bytes()+10*dt, s.runTools.bytes()+10*rt
		report += s.name + "\n" +
			"  the task, the tools known:\n" + row("direct tool calls", *s.directTask) + row("one run_code", *s.runTask) +
			fmt.Sprintf("  %-18s %6.1f %% fewer bytes with run_code\n", "reduction", fewer(rt, dt)) +
			fmt.Sprintf("  the tools (direct: the two tools' definitions; run_code: the listing and a get_tool_info of each): direct %d bytes, run_code %d bytes\n",
				s.directTools.bytes(), s.runTools.bytes()) +
			"  the task with the tools, once a session:\n" + row("direct tool calls", s.direct) + row("one run_code", s.viaRun) +
			fmt.Sprintf("  %-18s %6.1f %% fewer bytes with run_code; per turn %.1f %% fewer\n", "reduction",
				fewer(r, d), fewer(s.viaRun.turns(), s.direct.turns())) +
			fmt.Sprintf("  %-18s %6.1f %% fewer bytes with run_code, ten tasks a session (direct %d bytes a task, run_code %d)\n", "amortised",
				fewer(r10, d10), d10/10, r10/10)
	}
	fixed := out[0].viaRun.defs
	report += fmt.Sprintf("listing run_code and the three built-ins (tools/list, once per session): %d bytes %d tokens\n", fixed, tokens(fixed))
	t.Log(report)
	fmt.Fprintln(os.Stderr, report)
}
