package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// listingBudget is the most that listing run_code and the built-ins may cost, as the JSON
// of tools/list's tools without HTML escaping (how benchmarks' TestReportContext counts it):
// every session pays it before its first task. It was 6,104 bytes, then 5,179; raise it only
// for text a model needs, and say so beside the figure in the README.
const listingBudget = 4096

// TestListingTeachesAndFits: tools/list of an agent that runs code stays within
// listingBudget, and what it says still teaches what a model needs to use it: how to write a
// program and what it may await, its limits, how to find tools and how to read a handle.
func TestListingTeachesAndFits(t *testing.T) {
	a := Agent{Tenant: "t", Name: "a", CodeExecution: &CodeExec{Sandbox: fakeSandbox{ok("1")}, Terms: testTerms}}
	res, err := connect(t, a, nil).ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res.Tools); err != nil {
		t.Fatal(err)
	}
	if n := buf.Len() - 1; n > listingBudget {
		t.Errorf("the listing is %d bytes, over its budget of %d", n, listingBudget)
	}
	says := map[string][]string{
		ToolRunCode: {
			// Writing a program, and what it may await.
			"Python 3", "Top-level await and return", "last expression", "value_repr",
			"await <server>__<tool>(arg=1)", "Python identifier", "exactly the keywords of get_tool_info's python_stub",
			`await call_tool("<server>__<tool>", {"arg": 1})`, "TOOLS",
			"list_tools()", "get_tool_info(name)", "read_tool_output(handle, ...)", "budget.remaining()",
			// Failures and approvals.
			"ToolError", ".kind", "invalid_arguments", "denied", "approval_required_in_program", "traceback", "failure.executed false",
			// Handles.
			"head-and-tail previews", "read_tool_output reads the rest by handle", "ToolResultHandle", ".read(offset=, limit=)", ".read(pattern=)",
			// Limits in force.
			"nothing is kept between calls", "Limits in force: wall clock 30s, CPU 10s, memory 512MiB", "network none", "isolation process",
		},
		ToolListTools:      {"run_code programs can call", "deferred", "query", "best first", "server", "cursor", "next_cursor"},
		ToolGetToolInfo:    {"schemas", "annotations", "python_stub", "exactly those keywords", "return type"},
		ToolReadToolOutput: {"handle", "run_code stream or artifact", "large tool result", "limit", "offset (0-based)", "regular expression pattern"},
	}
	for _, tl := range res.Tools {
		for _, want := range says[tl.Name] {
			if !strings.Contains(tl.Description, want) {
				t.Errorf("%s's description does not say %q:\n%s", tl.Name, want, tl.Description)
			}
		}
		delete(says, tl.Name)
	}
	for name := range says {
		t.Errorf("%s is not listed", name)
	}
}
