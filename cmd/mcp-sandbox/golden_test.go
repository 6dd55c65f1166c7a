package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/approval"
	"github.com/mcp-sandbox/mcp-sandbox/assembly"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/execution"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
	"github.com/mcp-sandbox/mcp-sandbox/mcpserver"
)

var update = flag.Bool("update", false, "rewrite the golden result files under testdata/results")

// goldenPrograms are the programs whose results are pinned, one of each thing a result can say.
var goldenPrograms = []struct{ name, code string }{
	{"value", `print("hi"); return {"answer": 6 * 7, "list": [1, "two", None]}`},
	{"value_repr", `import datetime
return {1, 2, 3}`},
	{"failure", `print("kept")
x = 0
1 / x`},
	{"limit_hit", `open("big.bin", "wb").write(b"x" * 300000)`},
	{"handle", `got = await mock__bytes(n=5000, line=50)
page = await read_tool_output(got, limit=2)
return {"got": got, "page": page}`},
	{"refused", `kinds = {}
for name in ("mock__class", "mock__nope", "run_code"):
    try:
        await call_tool(name, {})
        kinds[name] = "ok"
    except ToolError as e:
        kinds[name] = [e.kind, str(e)]
return kinds`},
	{"artifact", `open("report.txt", "w").write("small report\n")
open("data.csv", "w").write("a,b\n" * 200)
print("\n".join(f"line {i}" for i in range(100)))`},
	{"approval", `try:
    await mock__add(a=1, b=2)
except ToolError as e:
    return [e.kind, str(e)]`},
}

// goldenConfig: tenant t granted the mock upstream with one tool denied and one under
// approval, a small preview and per-call result (so outputs and a binding result go under
// handles), a file size limit the limit_hit program breaks, outputs kept in dataDir.
func goldenConfig(mock, dataDir string) string {
	return fmt.Sprintf(`
data_dir: %[2]q
profiles:
  default:
    backend: process
    isolation: process
    allow_same_uid: true
    hard_limits: {wall_seconds: 60, file_size_bytes: 100000}
    binding_budget: {max_result_bytes: 2000}
    output: {preview_bytes: 200}
upstreams:
  mock: {command: [%[1]q]}
tenants:
  t:
    upstreams: [mock]
    policy: {deny: ["mock__class"], approval_required: ["mock__add"]}
    agents:
      a: {code_execution: {profile: default}}
`, mock, dataDir)
}

// TestGoldenResults pins the result document of a fixed set of programs, as execution.Execute
// returns it (with run's wiring, in this process) and as the built binary's `run` prints it,
// against testdata/results/*.json, with what differs by nature masked (maskResult). Both ways
// must give the same document; -update rewrites the files. A program whose call needs approval
// is refused where nobody can be asked (run), and declined where the asker declines.
func TestGoldenResults(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	mock := testkit.MockUpstream(t)
	dataDir := filepath.Join(dir, "data")
	cfgPath := testkit.WriteConfig(t, goldenConfig(mock, dataDir))
	cfg, err := loadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	oa, err := assembly.OpenAgent(ctx, cfg, "t", "a", assembly.OneShot, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer oa.Close()
	st, err := assembly.OpenStorage(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	execute := func(code string, asker approval.Asker) []byte {
		a := oa.Agent
		res := execution.Execute(ctx, a.CodeExecution,
			execution.Program{Code: code, Run: budget.RunRef{Tenant: "t", ID: budget.NewID("command:c_")}, AgentVersion: a.Version,
				Turn: a.Upstreams.Turn, Approvals: &approval.Asking{Asker: asker}},
			&execution.Options{Ledger: st.Ledger, Blobs: st.Blobs, Render: mcpserver.ModelReads})
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	masks := []string{dir, mock, dataDir}
	for _, p := range goldenPrograms {
		t.Run(p.name, func(t *testing.T) {
			in := maskResult(t, execute(p.code, nobodyToAsk{}), masks)
			checkGolden(t, p.name, in)
			out, errOut, code := runCLI(t, p.code, "run", "--config", cfgPath, "-")
			if code != 0 && code != 1 {
				t.Fatalf("run: exit %d: %s", code, errOut)
			}
			if got := maskResult(t, []byte(out), masks); !bytes.Equal(got, in) {
				t.Errorf("run printed a result other than Execute's:\n%s\nExecute:\n%s", got, in)
			}
		})
	}
	t.Run("approval_declined", func(t *testing.T) {
		checkGolden(t, "approval_declined", maskResult(t, execute(goldenPrograms[len(goldenPrograms)-1].code, decliner{}), masks))
	})
}

// decliner is a person who declines every call put to them.
type decliner struct{}

func (decliner) CanAsk() (bool, string) { return true, "" }
func (decliner) Ask(context.Context, approval.Question) (approval.Answer, error) {
	return approval.Answer{Action: approval.Decline, By: "golden"}, nil
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	file := filepath.Join("testdata", "results", name+".json")
	if *update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("result %s differs from %s:\n%s", name, file, got)
	}
}

// handleID matches a handle's id wherever it appears (an attachment, a value, a message).
var handleID = regexp.MustCompile(`\bh_[0-9A-Za-z_-]+`)

// maskResult re-renders a result document with sorted keys and two-space indent, masking what
// differs by nature between two executions of one program or two hosts: the duration, handle
// ids, the test's own paths, the bytes of the text rendering (which shows the duration), and
// the grade of each guarantee (what this host's kernel offers; the names stay).
func maskResult(t *testing.T, b []byte, paths []string) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not a result document: %v\n%s", err, b)
	}
	if _, ok := m["duration_seconds"]; ok {
		m["duration_seconds"] = "<duration>"
	}
	if g, ok := m["guarantees"].(map[string]any); ok {
		for k := range g {
			g[k] = "<grade>"
		}
	}
	if c, ok := m["context"].(map[string]any); ok {
		for _, half := range c {
			if h, ok := half.(map[string]any); ok {
				for _, k := range []string{"returned_bytes", "kept_out_bytes"} {
					if _, ok := h[k]; ok {
						h[k] = "<rendered>"
					}
				}
			}
		}
	}
	sort.Strings(paths)
	var walk func(v any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				v[k] = walk(e)
			}
		case []any:
			for i, e := range v {
				v[i] = walk(e)
			}
		case string:
			for i := len(paths) - 1; i >= 0; i-- { // longest first
				v = strings.ReplaceAll(v, paths[i], "<tmp>")
			}
			return handleID.ReplaceAllString(v, "<handle>")
		}
		return v
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(walk(m)); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
