package conformance

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// economy is a context report: context.execution of run_code, context of a kept direct result.
type economy struct {
	BindingBytes  float64 `json:"binding_bytes"`
	ReturnedBytes float64 `json:"returned_bytes"`
	KeptOutBytes  float64 `json:"kept_out_bytes"`
}

// TestContextMetrics (issue 29): the context economy as Prometheus series, scraped from the
// built binary's /metrics. A program that reads a 50 KB transcript and writes it into a record
// adds its execution's context report to the caller="program" series; a direct call whose
// 2 MB result is kept under a handle adds its own to caller="host"; a direct call answered
// whole adds what the host read. With --metrics-tenant-labels the series carry tenant and
// agent, the existing opt-in.
func TestContextMetrics(t *testing.T) {
	dir := t.TempDir()
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
data_dir: %[2]q
`+processProfile+`    hard_limits: {wall_seconds: 60}
upstreams:
  docs: {command: [%[1]q]}
tenants:
  acme-tenant:
    upstreams: [docs]
    agents:
      analyst:
        expose_upstream_tools: true
        code_execution: {limits: {wall_seconds: 60}}
`, built.mock, filepath.Join(dir, "data")))
	log := testkit.NewLog(t, "server")
	cs, _ := serveProcWith(t, cfg, log, nil, nil, "--metrics-listen", "127.0.0.1:0", "--metrics-tenant-labels", "--log-format", "json")
	url := "http://" + logAttr(t, log, "serving metrics", "addr") + "/metrics"

	var v any
	var full struct {
		Context struct {
			Execution economy `json:"execution"`
		} `json:"context"`
	}
	runInto(t, cs, "", `doc = await docs__transcript(meeting="m-42")
rec = await docs__create_record(title="Meeting m-42", body=doc)
return rec["id"]`, &v, &full)
	prog := full.Context.Execution
	if prog.BindingBytes < 50_000 || prog.KeptOutBytes < 49_000 || prog.KeptOutBytes != prog.BindingBytes-prog.ReturnedBytes {
		t.Fatalf("run_code's context report: %+v", prog)
	}

	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "docs__bytes", Arguments: map[string]any{"n": 2_000_000, "line": 100}})
	if err != nil || res.IsError {
		t.Fatalf("direct call: %v %v", err, res)
	}
	var kept struct {
		Handle  string  `json:"handle"`
		Context economy `json:"context"`
	}
	if b, err := structured(res, &kept); err != nil || kept.Handle == "" || kept.Context.KeptOutBytes < 1_990_000 {
		t.Fatalf("the direct call's result was not kept: %v %s", err, b)
	}
	small := call(t, cs, "docs__add", map[string]any{"a": 1, "b": 2})
	if small.IsError {
		t.Fatalf("docs__add: %s", texts(small))
	}
	smallBytes := float64(len(texts(small)))

	text, fams := scrapeText(t, url)
	who := map[string]string{"tenant": "acme-tenant", "agent": "analyst"}
	with := func(caller string) map[string]string {
		return map[string]string{"tenant": who["tenant"], "agent": who["agent"], "caller": caller}
	}
	for _, c := range []struct {
		name   string
		caller string
		want   float64
	}{
		{"mcp_sandbox_context_binding_bytes_total", "program", prog.BindingBytes},
		{"mcp_sandbox_context_returned_bytes_total", "program", prog.ReturnedBytes},
		{"mcp_sandbox_context_kept_out_bytes_total", "program", prog.KeptOutBytes},
		{"mcp_sandbox_context_binding_bytes_total", "host", kept.Context.BindingBytes + smallBytes},
		{"mcp_sandbox_context_returned_bytes_total", "host", kept.Context.ReturnedBytes + smallBytes},
		{"mcp_sandbox_context_kept_out_bytes_total", "host", kept.Context.KeptOutBytes},
	} {
		if got := value(fams, c.name, with(c.caller)); got != c.want {
			t.Errorf("%s{caller=%q} = %v, want %v", c.name, c.caller, got, c.want)
		}
	}
	if !strings.Contains(text, `mcp_sandbox_context_kept_out_bytes_total{agent="analyst",caller="program",tenant="acme-tenant"}`) {
		t.Errorf("the kept-out series is not labelled with tenant and agent:\n%s", grepLines(text, "context_kept_out"))
	}
}
