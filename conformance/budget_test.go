package conformance

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// fullResult is run_code's structured result with the budget and attachments.
type fullResult struct {
	result
	Attachments []attachment `json:"attachments"`
	Artifacts   []attachment `json:"artifacts"`
	Omitted     []struct {
		Path   string `json:"path"`
		Reason string `json:"reason"`
	} `json:"artifacts_omitted"`
	Budget struct {
		Execution usage `json:"execution"`
		Run       usage `json:"run"`
	} `json:"budget"`
	Context struct {
		Execution economy `json:"execution"`
		Run       economy `json:"run"`
	} `json:"context"`
}

type attachment struct {
	Name        string  `json:"name"`
	Handle      string  `json:"handle"`
	ContentType string  `json:"content_type"`
	Size        int64   `json:"size"`
	Truncated   bool    `json:"truncated"`
	Location    string  `json:"location"`
	Text        *string `json:"text"`
}

type usage struct {
	Calls          int64 `json:"calls"`
	TransferBytes  int64 `json:"transfer_bytes"`
	ProducedBytes  int64 `json:"produced_bytes"`
	PreservedBytes int64 `json:"preserved_bytes"`
}

// runIn runs code with run_code, in the Run named runID when it is not empty, and decodes the
// value into v; a failed program fails the test.
func runIn(t *testing.T, cs *mcp.ClientSession, runID, code string, v any) fullResult {
	t.Helper()
	var r fullResult
	runInto(t, cs, runID, code, v, &r)
	return r
}

// writeBudgetConfig writes budgetConfig in a new temporary directory (data_dir "data", the
// mock's counter "counter.json") and returns the config's path and the counter's.
func writeBudgetConfig(t *testing.T, budget, extra string) (cfg, counter string) {
	t.Helper()
	dir := t.TempDir()
	counter = filepath.Join(dir, "counter.json")
	return testkit.WriteConfig(t, budgetConfig(filepath.Join(dir, "data"), counter, budget, extra)), counter
}

// budgetConfig is one tenant t with the mock as upstream "support" (counting into counter),
// data_dir dataDir and the profile's binding_budget and extra profile lines.
func budgetConfig(dataDir, counter, budget, extra string) string {
	return fmt.Sprintf(`
data_dir: %q
`+processProfile+`    hard_limits: {wall_seconds: 90, memory_bytes: 1GiB}
    binding_budget: %s
%s
`, dataDir, budget, extra) + supportTenant(counter)
}

// supportTenant is what follows the profiles in a config with one tenant t: the mock as its
// upstream "support" (counting into counter), and a default agent whose programs may run 90 s.
func supportTenant(counter string) string {
	return fmt.Sprintf(`upstreams:
  support: {command: [%q], env: {MOCK_COUNTER_FILE: %q}}
tenants:
  t:
    upstreams: [support]
    agents:
      default:
        code_execution: {limits: {wall_seconds: 90}}
`, built.mock, counter)
}

// serveProc starts `serve` over stdio with the config file (and extra flags) and returns the
// session and the process, so a test can kill it. Its stderr goes to log.
func serveProc(t *testing.T, cfgPath string, log *testkit.Log, extra ...string) (*mcp.ClientSession, *exec.Cmd) {
	t.Helper()
	return serveProcWith(t, cfgPath, log, nil, nil, extra...)
}

// serveProcWith is serveProc with a client's options (handlers) and session options (the MCP
// revision it speaks).
func serveProcWith(t *testing.T, cfgPath string, log *testkit.Log, opts *mcp.ClientOptions, so *mcp.ClientSessionOptions, extra ...string) (*mcp.ClientSession, *exec.Cmd) {
	t.Helper()
	// Tests read the server's log: info lines too, which serve over stdio leaves out by default.
	cmd := exec.Command(built.sandbox, append([]string{"serve", "--config", cfgPath, "--log-level", "info"}, extra...)...)
	cmd.Stderr = log
	client := mcp.NewClient(&mcp.Implementation{Name: "conformance", Version: "0"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, so)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, cmd
}

const fiveCalls = `
out = []
for i in range(5):
    try:
        await support__lookup(sku=f"S{i}")
        out.append("ok")
    except ToolError as e:
        out.append(e.kind)
return out
`

// max_calls 3: three results and two refusals; the Run stays spent for a second program; a
// new session (a new Run) starts fresh.
func TestBudgetMaxCallsPerRun(t *testing.T) {
	cfg, counter := writeBudgetConfig(t, "{max_calls: 3}", "")
	cs, _ := serveProc(t, cfg, testkit.NewLog(t, "server"))
	var got []string
	r := runIn(t, cs, "", fiveCalls, &got)
	if want := "ok,ok,ok,budget_exceeded,budget_exceeded"; strings.Join(got, ",") != want {
		t.Errorf("first program: %v, want %s", got, want)
	}
	if r.Budget.Execution.Calls != 3 || r.Budget.Run.Calls != 3 {
		t.Errorf("budget = %+v", r.Budget)
	}
	runIn(t, cs, "", fiveCalls, &got)
	if want := "budget_exceeded,budget_exceeded,budget_exceeded,budget_exceeded,budget_exceeded"; strings.Join(got, ",") != want {
		t.Errorf("second program in the same Run: %v, want %s", got, want)
	}
	cs2, _ := serveProc(t, cfg, testkit.NewLog(t, "server"))
	runIn(t, cs2, "", fiveCalls, &got)
	if want := "ok,ok,ok,budget_exceeded,budget_exceeded"; strings.Join(got, ",") != want {
		t.Errorf("a new Run: %v, want %s", got, want)
	}
	if n := counts(t, counter)["lookup"]; n != 6 {
		t.Errorf("the mock ran lookup %d times, want 6", n)
	}
}

// kill -9 with eight binding calls in flight at once, each between its tool_call_started
// (concurrent calls' start records may share a commit) and the upstream's answer: after a
// restart on the same data_dir each call is unknown, each counts against the Run (whose
// max_calls they spend), and none is delivered again.
func TestBudgetCrashRecordsUnknown(t *testing.T) {
	const inFlight = 8
	cfg, counter := writeBudgetConfig(t, fmt.Sprintf("{max_calls: %d}", inFlight), "")
	const runID = "crash-run-1"
	cs, cmd := serveProc(t, cfg, testkit.NewLog(t, "server"))
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		_, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_code", Meta: mcp.Meta{"mcp-sandbox/run": runID},
			Arguments: map[string]any{"code": fmt.Sprintf(
				"import asyncio\nreturn await asyncio.gather(*[support__slow(seconds=40) for _ in range(%d)])", inFlight)}})
	}()
	deadline := time.Now().Add(60 * time.Second)
	for counts(t, counter)["slow"] < inFlight {
		if time.Now().After(deadline) {
			t.Fatalf("the slow calls never all reached the mock: %v", counts(t, counter))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cs.Wait() // the client's transport owns the process and waits for it

	log := testkit.NewLog(t, "server")
	cs2, _ := serveProc(t, cfg, log)
	stderr := log.String()
	if n := strings.Count(stderr, "tool call recorded unknown"); n != inFlight || !strings.Contains(stderr, "tool=support__slow") ||
		!strings.Contains(stderr, "run=named:"+runID) {
		t.Errorf("the restarted server reported %d in-flight calls unknown, want %d; stderr:\n%s", n, inFlight, stderr)
	}
	var got []string
	r := runIn(t, cs2, runID, fiveCalls, &got)
	if got[0] != "budget_exceeded" || r.Budget.Run.Calls != inFlight {
		t.Errorf("after the crash the Run's %d calls are spent, but a program got %v and the Run counts %d", inFlight, got, r.Budget.Run.Calls)
	}
	time.Sleep(500 * time.Millisecond)
	if c := counts(t, counter); c["slow"] != inFlight || c["lookup"] != 0 {
		t.Errorf("mock counts %v: want slow delivered exactly %d times and nothing else", c, inFlight)
	}
}

// 64 concurrent calls against max_calls 10: exactly 10 reach the upstream.
func TestBudgetConcurrentCallsExact(t *testing.T) {
	cfg, counter := writeBudgetConfig(t, "{max_calls: 10}", "")
	cs, _ := serveProc(t, cfg, testkit.NewLog(t, "server"))
	var got map[string]int
	runIn(t, cs, "", `
import asyncio
rs = await asyncio.gather(*[support__lookup(sku=f"S{i}") for i in range(64)], return_exceptions=True)
out = {}
for r in rs:
    k = r.kind if isinstance(r, ToolError) else ("ok" if isinstance(r, dict) else repr(r))
    out[k] = out.get(k, 0) + 1
return out
`, &got)
	if got["ok"] != 10 || got["budget_exceeded"] != 54 {
		t.Errorf("outcomes %v, want 10 ok and 54 budget_exceeded", got)
	}
	if n := counts(t, counter)["lookup"]; n != 10 {
		t.Errorf("the mock ran lookup %d times, want exactly 10", n)
	}
}

// The review's scenario through the built binary: a program calling list_tools and
// get_tool_info 600 times under a budget of 5 calls and 20 KB gets 5 answers, within 20 KB,
// and 595 budget_exceeded; the result's budget counts the 5 calls and their bytes.
func TestBudgetCountsBuiltins(t *testing.T) {
	cfg, _ := writeBudgetConfig(t, "{max_calls: 5, max_total_bytes: 20KB}", "")
	cs, _ := serveProc(t, cfg, testkit.NewLog(t, "server"))
	var got struct {
		Answered int            `json:"answered"`
		Crossed  int            `json:"crossed"`
		Kinds    map[string]int `json:"kinds"`
	}
	r := runIn(t, cs, "", `
import json
answered, crossed, kinds = 0, 0, {}
for i in range(600):
    try:
        v = await (list_tools() if i % 2 == 0 else get_tool_info("support__lookup"))
        answered += 1
        crossed += len(json.dumps(v))
    except ToolError as e:
        kinds[e.kind] = kinds.get(e.kind, 0) + 1
return {"answered": answered, "crossed": crossed, "kinds": kinds}
`, &got)
	if got.Answered != 5 || got.Crossed > 20_000 || got.Kinds["budget_exceeded"] != 595 {
		t.Errorf("built-in calls: %+v; want 5 answered within 20 KB and 595 budget_exceeded", got)
	}
	if b := r.Budget; b.Execution.Calls != 5 || b.Run.Calls != 5 || b.Execution.TransferBytes == 0 || b.Execution.TransferBytes > 20_000 {
		t.Errorf("budget = %+v, want 5 calls and their bytes (at most 20 KB)", b)
	}
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// httpSession connects to url over streamable HTTP with token as its bearer, allowing a
// server that is still starting its upstreams minutes; the session is closed when t ends.
func httpSession(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "conformance", Version: "0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token}}}, nil)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// 50 MiB of stdout: a bounded preview and a handle; read_tool_output pages it by window and
// by regex; another tenant learns nothing from the handle.
func TestOutputsLargeStdoutHandle(t *testing.T) {
	dir := t.TempDir()
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
data_dir: %q
`+processProfile+`    hard_limits: {wall_seconds: 90}
    output: {preview_bytes: 4000, max_bytes: 64MiB}
tenants:
  a:
    tokens: [%q]
    agents: {default: {code_execution: {limits: {wall_seconds: 90}}}}
  b:
    tokens: [%q]
    agents: {default: {code_execution: {limits: {wall_seconds: 90}}}}
`, filepath.Join(dir, "data"), configs.HashToken("token-a"), configs.HashToken("token-b")))
	base := ecoStartHTTP(t, cfg)
	a := httpSession(t, base+"/mcp", "token-a")
	r := runIn(t, a, "", `
import sys
pad = "y" * 86
for start in range(0, 524288, 4096):
    sys.stdout.write("".join(f"line {i:07d} {pad}\n" for i in range(start, start + 4096)))
`, nil)
	line := func(i int) string { return fmt.Sprintf("line %07d %s\n", i, strings.Repeat("y", 86)) }
	var out *attachment
	for i := range r.Attachments {
		if r.Attachments[i].Name == "stdout" {
			out = &r.Attachments[i]
		}
	}
	if out == nil || out.Handle == "" || out.Location != "blob" || out.Size != 50<<20 || !out.Truncated {
		t.Fatalf("stdout attachment = %+v", out)
	}
	if len(r.Stdout) > 4000 {
		t.Errorf("preview is %d bytes, over preview_bytes 4000", len(r.Stdout))
	}
	res := call(t, a, "read_tool_output", map[string]any{"handle": out.Handle, "offset": 1000, "limit": 100})
	var want strings.Builder
	for i := 1000; i < 1100; i++ {
		want.WriteString(line(i))
	}
	if res.IsError || testkit.Text(res) != want.String() {
		t.Errorf("window 1000+100: error %v, %d bytes, starts %.60q", res.IsError, len(testkit.Text(res)), testkit.Text(res))
	}
	res = call(t, a, "read_tool_output", map[string]any{"handle": out.Handle, "pattern": `^line 00(01234|05678|99999) `})
	var m struct {
		Matches []struct {
			Line int    `json:"line"`
			Text string `json:"text"`
		} `json:"matches"`
	}
	b, err := structured(res, &m)
	if err != nil || res.IsError || len(m.Matches) != 3 {
		t.Fatalf("search: %s (%v)", b, err)
	}
	for i, n := range []int{1234, 5678, 99999} {
		if m.Matches[i].Line != n || m.Matches[i].Text+"\n" != line(n) {
			t.Errorf("match %d = %+v, want line %d", i, m.Matches[i], n)
		}
	}
	bs := httpSession(t, base+"/mcp", "token-b")
	foreign := call(t, bs, "read_tool_output", map[string]any{"handle": out.Handle})
	never := call(t, bs, "read_tool_output", map[string]any{"handle": "h_0123456789abcdef0123456789abcdef"})
	if !foreign.IsError || testkit.Text(foreign) != testkit.Text(never) {
		t.Errorf("tenant B reading A's handle: %v %q; a handle that never existed: %q", foreign.IsError, testkit.Text(foreign), testkit.Text(never))
	}
}

// A 6 MiB binding result over a 1 MiB per-call ceiling reaches the program as a handle that
// it reads in windows; the transfer meter counts what crossed, not what was produced. (6 MiB:
// under the 8 MiB an answer from a stdio upstream may be, whatever the budgets say.)
func TestBudgetLargeResultHandle(t *testing.T) {
	cfg, _ := writeBudgetConfig(t,
		"{max_result_bytes: 1MiB, max_total_bytes: 64MiB, max_produced_bytes: 64MiB, max_preserved_bytes: 128MiB}", "")
	cs, _ := serveProc(t, cfg, testkit.NewLog(t, "server"))
	var v struct {
		Type, Kind   string
		Total, Lines int
		HandleLines  int `json:"handle_lines"`
	}
	r := runIn(t, cs, "", `
h = await support__bytes(n=6291456, line=1024)
total = lines = off = 0
while True:
    w = await h.read(offset=off, limit=512)
    total += len(w["text"]); lines += w["count"]; off += w["count"]
    if not w["more"]:
        break
try:
    await h.read(offset=0, limit=5000)
    kind = None
except ToolError as e:
    kind = e.kind
return {"type": type(h).__name__, "kind": kind, "total": total, "lines": lines, "handle_lines": h.lines}
`, &v)
	if v.Type != "ToolResultHandle" || v.Total != 6<<20 || v.Lines != 6144 || v.HandleLines != 6144 || v.Kind != "binding_result_too_large" {
		t.Errorf("value = %+v", v)
	}
	e := r.Budget.Execution
	if e.Calls != 1 || e.ProducedBytes < 6<<20 || e.PreservedBytes != 6<<20 || e.TransferBytes < 6<<20 || e.TransferBytes > 7<<20 {
		t.Errorf("execution budget = %+v", e)
	}
	// A program that takes the handle and reads one small window: produced and preserved are
	// the whole result, transfer only what crossed.
	r = runIn(t, cs, "", `
h = await support__bytes(n=6291456, line=1024)
w = await h.read(offset=10, limit=3)
return {"type": type(h).__name__, "total": len(w["text"]), "lines": w["count"]}
`, &v)
	e = r.Budget.Execution
	if v.Total != 3*1024 || e.ProducedBytes < 6<<20 || e.TransferBytes > 8<<10 || e.TransferBytes < 3*1024 {
		t.Errorf("value %+v, execution budget %+v", v, e)
	}
}

// Artifacts: a CSV and a PNG come back with handles, the small CSV whole in the result too
// (inline, its text); a symlink and a fifo are omitted.
func TestOutputsArtifacts(t *testing.T) {
	cfg, _ := writeBudgetConfig(t, "{}",
		"    artifacts: {collection: collect, max_files: 10, max_bytes: 1MiB}")
	cs, _ := serveProc(t, cfg, testkit.NewLog(t, "server"))
	r := runIn(t, cs, "", `
import os, base64
with open("table.csv", "w") as f:
    f.write("a,b\n1,2\n")
with open("dot.png", "wb") as f:
    f.write(base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="))
os.symlink("/etc/passwd", "passwd")
os.mkfifo("pipe")
`, nil)
	got := map[string]attachment{}
	for _, a := range r.Artifacts {
		got[a.Name] = a
	}
	if a := got["table.csv"]; a.Handle == "" || a.Location != "inline" || a.Size != 8 || a.Text == nil || *a.Text != "a,b\n1,2\n" {
		t.Errorf("table.csv = %+v", a)
	}
	if a := got["dot.png"]; a.Handle == "" || a.Location != "blob" || a.ContentType != "image/png" {
		t.Errorf("dot.png = %+v", a)
	}
	omitted := map[string]string{}
	for _, o := range r.Omitted {
		omitted[o.Path] = o.Reason
	}
	if omitted["passwd"] == "" || omitted["pipe"] == "" || len(r.Artifacts) != 2 {
		t.Errorf("artifacts %+v, omitted %+v", r.Artifacts, r.Omitted)
	}
	res := call(t, cs, "read_tool_output", map[string]any{"handle": got["table.csv"].Handle})
	if res.IsError || testkit.Text(res) != "a,b\n1,2\n" {
		t.Errorf("reading the CSV: %q", testkit.Text(res))
	}
}

// A large value is an attachment like the streams: a preview in the model's text, the whole
// kept under a handle that read_tool_output pages.
func TestOutputsLargeValueHandle(t *testing.T) {
	cfg, _ := writeBudgetConfig(t, "{}", "")
	cs, _ := serveProc(t, cfg, testkit.NewLog(t, "server"))
	var items []map[string]any
	r := runIn(t, cs, "", `[{"sku": f"S{i}", "qty": i} for i in range(5000)]`, &items)
	if len(items) != 5000 {
		t.Fatalf("structuredContent holds %d items, want the whole value", len(items))
	}
	var value *attachment
	for i := range r.Attachments {
		if r.Attachments[i].Name == "value" {
			value = &r.Attachments[i]
		}
	}
	if value == nil || value.Handle == "" || value.Location != "blob" {
		t.Fatalf("attachments %+v: want the value under a handle", r.Attachments)
	}
	res := call(t, cs, "read_tool_output", map[string]any{"handle": value.Handle, "pattern": `"S4321"`})
	if res.IsError || !strings.Contains(testkit.Text(res), "S4321") {
		t.Fatalf("searching the value: %q", testkit.Text(res))
	}
}
