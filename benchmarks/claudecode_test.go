//go:build linux

package benchmarks

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/internal/claudecode"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// hostView is what Claude Code handed its model over one session, counted from the last
// request it sent (which holds the whole conversation) and the tool listing: the definitions
// of the MCP tools of the servers counted (name, description, input_schema, as Claude Code
// lists them), each tool_use's name and input, and each tool_result's content as the model
// reads it. task counts only the calls of the tools it names (scenario C's task alone).
type hostView struct {
	defs, requests, results, calls int
	taskRequests, taskResults      int
}

func (v hostView) bytes() int { return v.defs + v.requests + v.results }

func readByClaude(t *testing.T, m *claudecode.Model, task map[string]bool, servers ...string) hostView {
	t.Helper()
	reqs := m.Messages()
	if len(reqs) == 0 {
		t.Fatal("Claude Code sent its model nothing")
	}
	var v hostView
	n := 0
	for _, d := range reqs[0].Tools {
		for _, s := range servers {
			if strings.HasPrefix(d.Name, "mcp__"+s+"__") {
				b, _ := json.Marshal(d)
				v.defs += len(b)
				n++
			}
		}
	}
	if n > 0 {
		v.defs += 2 + n - 1
	}
	names := map[string]string{}
	for _, msg := range reqs[len(reqs)-1].Messages {
		for _, b := range msg.Blocks() {
			switch b.Type {
			case "tool_use":
				req, _ := json.Marshal(map[string]any{"name": b.Name, "input": b.Input})
				v.requests += len(req)
				v.calls++
				names[b.ID] = b.Name
				if task[b.Name] {
					v.taskRequests += len(req)
				}
			case "tool_result":
				v.results += len(b.ResultText())
				if task[names[b.ToolUseID]] {
					v.taskResults += len(b.ResultText())
				}
			}
		}
	}
	return v
}

// calls scripts a model that makes each call of uses in a turn of its own, then answers.
func calls(uses ...claudecode.ToolUse) *claudecode.Model {
	var turns []claudecode.Turn
	for _, u := range uses {
		turns = append(turns, claudecode.Turn{ToolUses: []claudecode.ToolUse{u}})
	}
	return &claudecode.Model{Turns: append(turns, claudecode.Turn{Text: "done"})}
}

func use(name string, input map[string]any) claudecode.ToolUse {
	return claudecode.ToolUse{Name: name, Input: input}
}

// TestReportContextClaudeCode prints what Claude Code (the host, its model a scripted
// Messages API: internal/claudecode) hands its model doing TestReportContext's three tasks,
// directly (the mock servers connected to Claude Code, their tools called one a turn) and with
// run_code (mcp-sandbox connected, the same list_tools, get_tool_info and program): the MCP
// tool definitions it lists, every tool_use and every tool_result, in bytes. It runs under
// make bench (-bench-report) only: seven Claude Code sessions. conformance's TestClaudeCodeHost
// holds the cheap assertions (the result's size, returned_bytes equal to what Claude Code
// hands its model).
func TestReportContextClaudeCode(t *testing.T) {
	gate.AppliesOnly(t, *report, "a report of make bench (-bench-report): seven Claude Code sessions")
	here, _ := filepath.Abs(".")
	claude := claudecode.Claude(t, here)
	sandbox, mock := testkit.Binary(t), testkit.MockUpstream(t)
	sandboxServer := map[string]claudecode.Server{"sandbox": {Command: sandbox,
		Args: []string{"serve", "--config", contextConfig(t, mock), "--agent", "model"}}}
	session := func(m *claudecode.Model, servers map[string]claudecode.Server) {
		t.Helper()
		var allowed []string
		for name := range servers {
			allowed = append(allowed, "mcp__"+name)
		}
		claudecode.Run(t, m, &claudecode.Options{Claude: claude, Servers: servers, AllowedTools: allowed, Prompt: "Do the task."})
	}
	run := func(tool string, input map[string]any) claudecode.ToolUse { return use("mcp__sandbox__"+tool, input) }

	type row struct {
		name           string
		direct, viaRun hostView
	}
	var rows []row

	// A: 40 lookups.
	var lookups []claudecode.ToolUse
	for i := range 40 {
		lookups = append(lookups, use("mcp__support__lookup", map[string]any{"sku": fmt.Sprintf("S%d", i)}))
	}
	m := calls(lookups...)
	session(m, map[string]claudecode.Server{"support": {Command: mock}})
	direct := readByClaude(t, m, nil, "support")
	m = calls(run("list_tools", map[string]any{"server": "support", "query": "lookup"}),
		run("get_tool_info", map[string]any{"name": "support__lookup"}), run("run_code", map[string]any{"code": scenarioAProgram}))
	session(m, sandboxServer)
	rows = append(rows, row{"A: 40 lookups joined into one answer", direct, readByClaude(t, m, nil, "sandbox")})

	// B: five of a deferred server's 351 tools.
	var five []claudecode.ToolUse
	for _, n := range scenarioBTools {
		five = append(five, use(fmt.Sprintf("mcp__big__tool-%04d", n), map[string]any{"q": "report"}))
	}
	m = calls(five...)
	session(m, map[string]claudecode.Server{"big": {Command: mock, Args: []string{"--many", "351", "--page-size", "40"}}})
	direct = readByClaude(t, m, nil, "big")
	m = calls(run("list_tools", map[string]any{"server": "big", "query": "number 17."}),
		run("get_tool_info", map[string]any{"name": "big__tool-0017"}), run("run_code", map[string]any{"code": scenarioBProgram}))
	session(m, sandboxServer)
	rows = append(rows, row{"B: 5 of a deferred server's 351 tools, combined", direct, readByClaude(t, m, nil, "sandbox")})

	// C: a 50 KB transcript read from one server and written into a record of another; the
	// model copies what it read into the record's body.
	m = &claudecode.Model{Script: func(req claudecode.MessagesRequest, n int) claudecode.Turn {
		switch n {
		case 0:
			return claudecode.Turn{ToolUses: []claudecode.ToolUse{use("mcp__docs__transcript", map[string]any{"meeting": "m-42"})}}
		case 1:
			doc := ""
			for _, b := range claudecode.ToolResults(req) {
				doc = b.ResultText()
			}
			return claudecode.Turn{ToolUses: []claudecode.ToolUse{use("mcp__crm__create_record", map[string]any{"title": "Meeting m-42", "body": doc})}}
		}
		return claudecode.Turn{Text: "done"}
	}}
	session(m, map[string]claudecode.Server{"docs": {Command: mock}, "crm": {Command: mock}})
	direct = readByClaude(t, m, map[string]bool{"mcp__docs__transcript": true, "mcp__crm__create_record": true}, "docs", "crm")
	// What Claude Code made of the 50 KB result (it keeps a large one out of the context).
	var transcript string
	if reqs := m.Messages(); len(reqs) > 1 {
		for _, b := range claudecode.ToolResults(reqs[1]) {
			transcript = b.ResultText()
		}
	}
	m = calls(run("get_tool_info", map[string]any{"name": "docs__transcript"}), run("get_tool_info", map[string]any{"name": "crm__create_record"}),
		run("run_code", map[string]any{"code": scenarioCProgram}))
	session(m, sandboxServer)
	viaRun := readByClaude(t, m, map[string]bool{"mcp__sandbox__run_code": true}, "sandbox")
	rows = append(rows, row{"C: a 50 KB transcript read from one server, written into a record of another", direct, viaRun})

	out := "what Claude Code hands its model, in bytes: MCP tool definitions it lists, every tool_use, every tool_result\n"
	line := func(label string, v hostView) string {
		return fmt.Sprintf("  %-18s %7d bytes  (definitions %d, %d tool_use %d, tool_result %d)\n", label, v.bytes(), v.defs, v.calls, v.requests, v.results)
	}
	for _, r := range rows {
		out += r.name + "\n" + line("direct tool calls", r.direct) + line("run_code", r.viaRun) +
			fmt.Sprintf("  %-18s %6.1f %% fewer bytes with run_code\n", "reduction", 100*(1-float64(r.viaRun.bytes())/float64(r.direct.bytes())))
	}
	c := rows[2]
	dt, rt := c.direct.taskRequests+c.direct.taskResults, c.viaRun.taskRequests+c.viaRun.taskResults
	out += fmt.Sprintf("C, the task alone (its calls, the tools known): direct %d bytes, run_code %d bytes: %.1f %% fewer\n", dt, rt, 100*(1-float64(rt)/float64(dt)))
	out += fmt.Sprintf("C directly, the 50 KB transcript as Claude Code handed it to its model (%d bytes): %.300q\n", len(transcript), transcript)
	t.Log(out)
	fmt.Fprintln(os.Stderr, out)
}
