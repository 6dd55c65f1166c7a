package conformance

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// The operator's view of the built binary (README "Operating it"): /metrics on its own
// listener, and JSON logs whose every line of an execution names it.

// operateConfig is tenant "acme-tenant" with the mock as upstream "mock" and a budget of three
// calls per execution (and per Run: each program runs in a Run of its own).
func operateConfig(dataDir string) string {
	return fmt.Sprintf(`
data_dir: %[2]q
`+processProfile+`    hard_limits: {wall_seconds: 60, memory_bytes: 1GiB}
    binding_budget: {max_calls: 3}
upstreams:
  mock: {command: [%[1]q]}
tenants:
  acme-tenant:
    upstreams: [mock]
    agents:
      analyst:
        code_execution: {limits: {wall_seconds: 60}}
`, built.mock, dataDir)
}

// marker is in every program's text and arguments: no series and no label may carry it.
const marker = "PROGRAM_TEXT_MARKER_7f3a"

// operatePrograms are the executions the metrics test makes, each in a Run of its own: name →
// program. Each ends as its comment says.
var operatePrograms = []struct{ run, code string }{
	// completed: two calls ok
	{"two-calls", `a = await mock__lookup(sku="` + marker + `")
b = await mock__add(a=1, b=2)
return [a["sku"], b["sum"]]`},
	// completed: one tool_error, one call of a name that is no upstream's (unavailable)
	{"errors", `out = []
for name in ("mock__fail", "` + marker + `__x"):
    try:
        await call_tool(name, {})
    except ToolError as e:
        out.append(e.kind)
return out`},
	// completed: the fourth call is refused by max_calls (3)
	{"budget", `out = []
for i in range(4):
    try:
        await mock__add(a=i, b=1)
        out.append("ok")
    except ToolError as e:
        out.append(e.kind)
return out`},
	// completed: a destructive tool needs approval, which the host's person gives
	{"approval", `return await call_tool("mock__delete-everything", {})`},
	// completed: a result over max_result_bytes (1 MiB) comes back as a handle; stdout over
	// its preview is kept under a handle too
	{"handles", `h = await mock__bytes(n=1500000, line=100)
print("` + marker + `" * 2000)
return h.size`},
}

func TestMetricsMove(t *testing.T) {
	dir := t.TempDir()
	log := testkit.NewLog(t, "server")
	accept := func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept"}, nil
	}
	cs, _ := serveProcWith(t, testkit.WriteConfig(t, operateConfig(filepath.Join(dir, "data"))), log,
		&mcp.ClientOptions{ElicitationHandler: accept}, revisionElicit, "--metrics-listen", "127.0.0.1:0", "--log-format", "json")
	url := "http://" + logAttr(t, log, "serving metrics", "addr") + "/metrics"

	before := scrape(t, url)
	if got := value(before, "mcp_sandbox_executions_total", nil); got != 0 {
		t.Fatalf("executions before any: %v", got)
	}
	// The server keeps one child warm for the agent's terms: once it is up, the first
	// execution takes it, so warm and cold are both seen whatever the machine's load.
	waitForSeries(t, url, "mcp_sandbox_warm_children", map[string]string{"profile": "default"}, 1)
	want := map[string]any{
		"two-calls": []any{marker, 3.0},
		"errors":    []any{"tool_error", "unavailable"},
		"budget":    []any{"ok", "ok", "ok", "budget_exceeded"},
		"approval":  "deleted",
		"handles":   1500000.0,
	}
	for _, p := range operatePrograms {
		var v any
		var full fullResult
		runInto(t, cs, p.run, p.code, &v, &full)
		if fmt.Sprint(v) != fmt.Sprint(want[p.run]) {
			t.Fatalf("%s: value %v, want %v", p.run, v, want[p.run])
		}
	}
	// One program that fails.
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_code",
		Arguments: map[string]any{"code": `raise ValueError("` + marker + `")`}, Meta: mcp.Meta{"mcp-sandbox/run": "fails"}})
	if err != nil || !res.IsError {
		t.Fatalf("a failing program: %v %v", res, err)
	}

	text, after := scrapeText(t, url)
	if strings.Contains(text, marker) {
		t.Errorf("a series carries program text:\n%s", grepLines(text, marker))
	}
	if strings.Contains(text, "acme-tenant") || strings.Contains(text, "analyst") {
		t.Errorf("tenant or agent in the series without --metrics-tenant-labels:\n%s", grepLines(text, "acme"))
	}
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"mcp_sandbox_executions_total", map[string]string{"profile": "default", "outcome": "completed", "kind": ""}, 5},
		{"mcp_sandbox_executions_total", map[string]string{"outcome": "failed", "kind": "program_error"}, 1},
		{"mcp_sandbox_executions_total", map[string]string{"outcome": "refused"}, 0},
		{"mcp_sandbox_tool_calls_total", map[string]string{"caller": "program", "upstream": "mock", "outcome": "ok"}, 7},
		{"mcp_sandbox_tool_calls_total", map[string]string{"upstream": "mock", "outcome": "tool_error"}, 1},
		{"mcp_sandbox_tool_calls_total", map[string]string{"upstream": "_unknown", "outcome": "unavailable"}, 1},
		{"mcp_sandbox_tool_calls_total", map[string]string{"upstream": "mock", "outcome": "budget_exceeded"}, 1},
		{"mcp_sandbox_budget_refusals_total", map[string]string{"meter": "max_calls", "half": "execution"}, 1},
		{"mcp_sandbox_approvals_total", map[string]string{"decision": "accepted"}, 1},
		{"mcp_sandbox_approvals_total", map[string]string{"decision": "unasked"}, 0},
		{"mcp_sandbox_handles_stored_total", map[string]string{"source": "binding"}, 1},
		{"mcp_sandbox_handles_stored_total", map[string]string{"source": "output"}, 1},
		{"mcp_sandbox_upstream_sessions", map[string]string{"upstream": "mock"}, 1},
	}
	for _, c := range checks {
		if got := value(after, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// Histograms: every execution observed once, by how its child was had; every call of
	// the mock observed once (ok 7, tool_error, budget_exceeded: 9).
	warm := histCount(after, "mcp_sandbox_execution_duration_seconds", map[string]string{"profile": "default", "start": "warm"})
	cold := histCount(after, "mcp_sandbox_execution_duration_seconds", map[string]string{"profile": "default", "start": "cold"})
	if warm+cold != 6 || warm == 0 {
		t.Errorf("execution durations: %d warm + %d cold, want 6 with warm children used", warm, cold)
	}
	if got := histCount(after, "mcp_sandbox_tool_call_duration_seconds", map[string]string{"caller": "program", "upstream": "mock"}); got != 9 {
		t.Errorf("mock call durations observed %d times, want 9", got)
	}
	if got := histSum(after, "mcp_sandbox_execution_duration_seconds", nil); got <= 0 {
		t.Errorf("execution durations sum to %v", got)
	}
	if got := value(after, "mcp_sandbox_preserved_bytes_total", map[string]string{"source": "binding"}); got < 1500000 {
		t.Errorf("binding bytes preserved %v, want the 1.5 MB result", got)
	}
	if _, ok := after["mcp_sandbox_warm_children"]; !ok {
		t.Error("no warm pool depth")
	}
}

func TestJSONLogsParse(t *testing.T) {
	dir := t.TempDir()
	log := testkit.NewLog(t, "server")
	cs, cmd := serveProc(t, testkit.WriteConfig(t, operateConfig(filepath.Join(dir, "data"))), log, "--log-format", "json", "--log-level", "debug")
	// An upstream that dies mid-call makes a warning inside the execution: it must name the
	// execution as the run_code line does.
	var v any
	var full fullResult
	runInto(t, cs, "crash-run", `try:
    await mock__crash()
except ToolError as e:
    return e.kind`, &v, &full)
	if v != "upstream_error" {
		t.Fatalf("crash: %v", v)
	}
	runInto(t, cs, "second", `return 1`, &v, &full)
	cs.Close()
	_ = cmd.Wait()

	type line map[string]any
	var lines []line
	sc := bufio.NewScanner(strings.NewReader(log.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Errorf("a log line is not JSON: %v: %q", err, sc.Text())
			continue
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := l[k]; !ok {
				t.Errorf("a log line without %q: %v", k, l)
			}
		}
		lines = append(lines, l)
	}
	execOf := map[string]string{} // run → execution id, from its run_code line
	for _, l := range lines {
		if l["msg"] == "run_code" {
			execOf[fmt.Sprint(l["run"])] = fmt.Sprint(l["execution"])
		}
		if _, ok := l["execution"]; !ok {
			continue
		}
		for _, k := range []string{"tenant", "agent", "run"} {
			if _, ok := l[k]; !ok {
				t.Errorf("a line of an execution without %q: %v", k, l)
			}
		}
	}
	if len(execOf) != 2 || execOf["named:crash-run"] == "" || execOf["named:crash-run"] == execOf["named:second"] {
		t.Fatalf("run_code lines by run: %v", execOf)
	}
	found := false
	for _, l := range lines {
		if l["msg"] == "upstream call failed" {
			found = true
			if l["execution"] != execOf["named:crash-run"] || l["tenant"] != "acme-tenant" || l["agent"] != "analyst" || l["server"] != "mock" {
				t.Errorf("the upstream's failure inside an execution does not name it: %v (its execution: %s)", l, execOf["named:crash-run"])
			}
		}
	}
	if !found {
		t.Error("no line says the upstream call failed")
	}
}

// waitForSeries waits (bounded) until the series of name with labels reads want.
func waitForSeries(t *testing.T, url, name string, labels map[string]string, want float64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := value(scrape(t, url), name, labels)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s%v stayed %v, want %v", name, labels, got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// logAttr waits for the JSON log line whose msg is msg and returns its attribute key.
func logAttr(t *testing.T, log *testkit.Log, msg, key string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, raw := range strings.Split(log.String(), "\n") {
			var l map[string]any
			if json.Unmarshal([]byte(raw), &l) == nil && l["msg"] == msg {
				if s, ok := l[key].(string); ok {
					return s
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no log line %q with %q", msg, key)
	return ""
}

func scrapeText(t *testing.T, url string) (string, map[string]*dto.MetricFamily) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	if _, err := bufio.NewReader(resp.Body).WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("scrape: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(b.String()))
	if err != nil {
		t.Fatalf("the exposition does not parse: %v", err)
	}
	return b.String(), fams
}

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	_, f := scrapeText(t, url)
	return f
}

// series returns the metrics of family name whose labels include want.
func series(fams map[string]*dto.MetricFamily, name string, want map[string]string) []*dto.Metric {
	var out []*dto.Metric
	f := fams[name]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		out = append(out, m)
	}
	return out
}

// value sums the counters or gauges of name whose labels include want.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var sum float64
	for _, m := range series(fams, name, want) {
		sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return sum
}

func histCount(fams map[string]*dto.MetricFamily, name string, want map[string]string) uint64 {
	var n uint64
	for _, m := range series(fams, name, want) {
		n += m.GetHistogram().GetSampleCount()
	}
	return n
}

func histSum(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var s float64
	for _, m := range series(fams, name, want) {
		s += m.GetHistogram().GetSampleSum()
	}
	return s
}

func grepLines(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestOTLPExport: with OTEL_EXPORTER_OTLP_ENDPOINT set, the built binary exports its spans over
// OTLP/HTTP (protobuf) to the collector named, here one this test plays on loopback; by the
// time serve has exited, the spans of a run_code and of its binding call have arrived, under
// the host's trace id.
func TestOTLPExport(t *testing.T) {
	var mu sync.Mutex
	got := map[string]string{} // span name → trace id (hex)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
		var req coltracepb.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || err != nil || proto.Unmarshal(body, &req) != nil {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					got[s.Name] = hex.EncodeToString(s.TraceId)
				}
			}
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(b)
	}))
	defer collector.Close()

	dir := t.TempDir()
	cmd := exec.Command(built.sandbox, "serve", "--log-level", "info", "--config", testkit.WriteConfig(t, operateConfig(filepath.Join(dir, "data"))))
	cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT="+collector.URL, "OTEL_SERVICE_NAME=ops-test")
	cmd.Stderr = testkit.NewLog(t, "server")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "conformance", Version: "0"}, nil).Connect(ctx,
		&mcp.CommandTransport{Command: cmd, TerminateDuration: 15 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const hostTrace = "0af7651916cd43dd8448eb211c80319c"
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_code",
		Meta:      mcp.Meta{"traceparent": "00-" + hostTrace + "-b7ad6b7169203331-01"},
		Arguments: map[string]any{"code": `return (await mock__add(a=1, b=2))["sum"]`}})
	if err != nil || res.IsError {
		t.Fatalf("run_code: %v %v", res, err)
	}
	cs.Close() // serve exits, and flushes its spans on the way out
	mu.Lock()
	defer mu.Unlock()
	for _, name := range []string{"tools/call run_code", "binding mock__add", "tools/call add"} {
		if got[name] != hostTrace {
			t.Errorf("span %q: trace %q, want the host's %s (spans received: %v)", name, got[name], hostTrace, got)
		}
	}
}
