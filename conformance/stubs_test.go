package conformance

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// toolStubs asks get_tool_info, as a host does, for the python_stub of every tool list_tools
// names on server.
func toolStubs(t *testing.T, cs *mcp.ClientSession, server string) map[string]string {
	t.Helper()
	stubs := map[string]string{}
	cursor := ""
	for {
		args := map[string]any{"server": server}
		if cursor != "" {
			args["cursor"] = cursor
		}
		var page struct {
			Tools []struct {
				Name        string `json:"name"`
				Unavailable string `json:"unavailable"`
			} `json:"tools"`
			NextCursor string `json:"next_cursor"`
		}
		res := call(t, cs, "list_tools", args)
		b, err := structured(res, &page)
		if err != nil || res.IsError {
			t.Fatalf("list_tools %s: %v %s", server, err, b)
		}
		for _, tl := range page.Tools {
			res := call(t, cs, "get_tool_info", map[string]any{"name": tl.Name})
			var info struct {
				PythonStub string `json:"python_stub"`
			}
			b, err := structured(res, &info)
			if err != nil || res.IsError || info.PythonStub == "" {
				t.Fatalf("get_tool_info %s: %v %s", tl.Name, err, b)
			}
			if !strings.Contains(texts(res), "python_stub:\n"+info.PythonStub) {
				t.Errorf("get_tool_info %s: the text does not carry the stub as Python", tl.Name)
			}
			stubs[tl.Name] = info.PythonStub
		}
		if page.NextCursor == "" {
			return stubs
		}
		cursor = page.NextCursor
	}
}

func texts(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// typeCheck writes each stub to a .pyi file, parses it with Python's ast and type-checks them
// all with Debian's mypy --strict.
func typeCheck(t *testing.T, stubs map[string]string) {
	t.Helper()
	py, err := exec.LookPath("python3")
	gate.Require(t, "python", err == nil, "python3 is not on PATH")
	mypy, err := exec.LookPath("mypy")
	gate.Require(t, "mypy", err == nil, "mypy is not on PATH (apt-get install mypy)")
	dir := t.TempDir()
	var files []string
	i := 0
	for name, stub := range stubs {
		f := filepath.Join(dir, fmt.Sprintf("stub_%03d.pyi", i))
		i++
		if err := os.WriteFile(f, []byte(stub), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(py, "-c", "import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])", f).CombinedOutput(); err != nil {
			t.Errorf("ast.parse of %s's stub: %v\n%s\n%s", name, err, out, stub)
		}
		files = append(files, f)
	}
	args := append([]string{"--strict", "--no-incremental", "--cache-dir", filepath.Join(dir, ".cache")}, files...)
	if out, err := exec.Command(mypy, args...).CombinedOutput(); err != nil {
		t.Errorf("mypy --strict on %d stubs: %v\n%s", len(files), err, out)
	}
}

// TestStubsTypeCheck: get_tool_info's python_stub of every tool of the mock and of
// server-everything parses as Python and passes mypy --strict; a typed tool's stub names its
// keywords and types.
func TestStubsTypeCheck(t *testing.T) {
	t.Run("mock", func(t *testing.T) {
		cfg, _ := mockConfig(t)
		cs, _ := serve(t, cfg, nil)
		stubs := toolStubs(t, cs, "support")
		if s := stubs["support__lookup"]; !strings.Contains(s, "async def support__lookup(*, sku: str) -> Any:") {
			t.Errorf("support__lookup's stub:\n%s", s)
		}
		if s := stubs["support__list-repos"]; !strings.Contains(s, `call_tool(name: Literal["support__list-repos"]`) {
			t.Errorf("support__list-repos's stub (no alias):\n%s", s)
		}
		typeCheck(t, stubs)
	})
	t.Run("server-everything", func(t *testing.T) {
		cs, _ := serve(t, "data_dir: \"-\"\n"+everythingConfig(t), nil)
		stubs := toolStubs(t, cs, "everything")
		if len(stubs) < 5 {
			t.Fatalf("only %d tools: %v", len(stubs), stubs)
		}
		if s := stubs["everything__get-sum"]; !strings.Contains(s, "    a: float\n    b: float\n") {
			t.Errorf("everything__get-sum's stub:\n%s", s)
		}
		typeCheck(t, stubs)
	})
}

// TestBindingMisspeltKeyword: a binding called with a keyword its tool does not take, or
// without a required one, raises ToolError invalid_arguments naming it, and the upstream is
// never called; a program that empties its own check meets the host's.
func TestBindingMisspeltKeyword(t *testing.T) {
	cfg, counter := mockConfig(t)
	cs, _ := serve(t, cfg, nil)
	var got map[string][]string
	run(t, cs, `
out = {}
async def attempt(key, f, **kw):
    try:
        await f(**kw)
        out[key] = ["called"]
    except ToolError as e:
        out[key] = [e.kind, e.tool, str(e)]
await attempt("misspelt", support__lookup, skuu="A")
await attempt("missing", support__lookup)
await attempt("call_tool", call_tool, name="support__lookup", arguments={"sku": "A", "colour": "red"})
call_tool.__globals__["_signatures"].clear()   # a hostile program skips its own side
await attempt("host", support__lookup, skuu="A")
return out
`, &got)
	want := map[string][]string{
		"misspelt":  {"invalid_arguments", "support__lookup", `support__lookup takes no argument "skuu" (did you mean "sku"?); it takes sku`},
		"missing":   {"invalid_arguments", "support__lookup", `support__lookup is missing its required argument "sku"`},
		"call_tool": {"invalid_arguments", "support__lookup", `support__lookup takes no argument "colour"; it takes sku`},
		"host":      {"invalid_arguments", "support__lookup", `support__lookup takes no argument "skuu" (did you mean "sku"?); it takes sku`},
	}
	for k, w := range want {
		if g := got[k]; strings.Join(g, "|") != strings.Join(w, "|") {
			t.Errorf("%s: got %q, want %q", k, g, w)
		}
	}
	if n := counts(t, counter)["lookup"]; n != 0 {
		t.Errorf("the mock ran lookup %d times, want 0", n)
	}
}
