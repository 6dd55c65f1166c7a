package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
)

var acme = telemetry.Scope{Tenant: "acme", Agent: "analyst"}

func TestSeriesWithoutTenantLabels(t *testing.T) {
	m := New(nil)
	m.Execution(acme, telemetry.Execution{Profile: "default", Level: "isolated", Outcome: "completed", Start: "warm", Seconds: 0.2})
	m.Execution(telemetry.Scope{Tenant: "other", Agent: "x"}, telemetry.Execution{Profile: "default", Level: "isolated", Outcome: "completed", Start: "cold", Seconds: 0.7})
	m.Call(acme, telemetry.Call{Upstream: "docs", Outcome: "ok", Seconds: 0.01})
	m.Call(acme, telemetry.Call{Upstream: "docs", Outcome: "ok", Direct: true, Seconds: 0.01})
	m.BudgetRefusal(acme, "max_calls", "run")
	m.Approval(acme, "timed_out")
	m.Kept(acme, "binding", 1000)
	m.Kept(acme, "binding", 500)
	if got := testutil.ToFloat64(m.executions.WithLabelValues("default", "isolated", "completed", "")); got != 2 {
		t.Errorf("executions of both tenants under one series: %v", got)
	}
	if got := testutil.ToFloat64(m.calls.WithLabelValues("program", "docs", "ok")); got != 1 {
		t.Errorf("program calls: %v", got)
	}
	if got := testutil.ToFloat64(m.calls.WithLabelValues("host", "docs", "ok")); got != 1 {
		t.Errorf("host calls: %v", got)
	}
	if got := testutil.ToFloat64(m.keptBytes.WithLabelValues("binding")); got != 1500 {
		t.Errorf("kept bytes: %v", got)
	}
	body := scrape(t, m)
	for _, want := range []string{
		`mcp_sandbox_execution_duration_seconds_bucket{profile="default",start="warm",le="0.25"} 1`,
		`mcp_sandbox_execution_duration_seconds_bucket{profile="default",start="cold",le="0.5"} 0`,
		`mcp_sandbox_budget_refusals_total{half="run",meter="max_calls"} 1`,
		`mcp_sandbox_approvals_total{decision="timed_out"} 1`,
		`mcp_sandbox_build_info{version="dev"} 1`,
		`go_goroutines `,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("exposition lacks %s", want)
		}
	}
	if strings.Contains(body, "acme") || strings.Contains(body, "analyst") {
		t.Error("tenant or agent in the exposition without TenantLabels")
	}
}

func TestTenantLabels(t *testing.T) {
	m := New(&Options{TenantLabels: true, Version: "v1"})
	m.Execution(acme, telemetry.Execution{Profile: "p", Level: "none", Outcome: "refused", Kind: "isolation_unavailable", Start: "none"})
	m.Upstreams(func() []UpstreamState {
		return []UpstreamState{{Tenant: "acme", Upstream: "docs", Connected: true}, {Tenant: "b", Upstream: "docs"}}
	})
	body := scrape(t, m)
	for _, want := range []string{
		`mcp_sandbox_executions_total{agent="analyst",kind="isolation_unavailable",level="none",outcome="refused",profile="p",tenant="acme"} 1`,
		`mcp_sandbox_upstream_sessions{tenant="acme",upstream="docs"} 1`,
		`mcp_sandbox_upstream_sessions{tenant="b",upstream="docs"} 0`,
		`mcp_sandbox_build_info{version="v1"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("exposition lacks %s", want)
		}
	}
}

func TestGaugesReadAtScrape(t *testing.T) {
	m := New(nil)
	idle := 0
	m.WarmPool("default", func() int { return idle })
	m.WarmPool("boxed", func() int { return 3 })
	live := false
	m.Upstreams(func() []UpstreamState {
		return []UpstreamState{{Tenant: "a", Upstream: "docs", Connected: live}, {Tenant: "b", Upstream: "docs", Connected: true}, {Tenant: "a", Upstream: "crm"}}
	})
	before := scrape(t, m)
	idle, live = 1, true
	after := scrape(t, m)
	for body, want := range map[string][]string{
		before: {`mcp_sandbox_warm_children{profile="default"} 0`, `mcp_sandbox_upstream_sessions{upstream="docs"} 1`, `mcp_sandbox_upstream_sessions{upstream="crm"} 0`},
		after:  {`mcp_sandbox_warm_children{profile="default"} 1`, `mcp_sandbox_warm_children{profile="boxed"} 3`, `mcp_sandbox_upstream_sessions{upstream="docs"} 2`},
	} {
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("exposition lacks %s", w)
			}
		}
	}
}

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	if rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, b)
	}
	return string(b)
}

// The quota gauges: per tenant with TenantLabels, else the server's totals, read at scrape.
func TestQuotaGauges(t *testing.T) {
	loads := []Load{{Tenant: "a", Running: 2, Queued: 3, Sessions: 4}, {Tenant: "b", Running: 1, Sessions: 1}}
	plain := New(nil)
	plain.Quotas(func() []Load { return loads })
	labelled := New(&Options{TenantLabels: true})
	labelled.Quotas(func() []Load { return loads })
	for body, want := range map[string][]string{
		scrape(t, plain): {"mcp_sandbox_executions_running 3", "mcp_sandbox_executions_queued 3", "mcp_sandbox_sessions 5"},
		scrape(t, labelled): {`mcp_sandbox_executions_running{tenant="a"} 2`, `mcp_sandbox_executions_queued{tenant="a"} 3`,
			`mcp_sandbox_sessions{tenant="b"} 1`},
	} {
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("exposition lacks %s", w)
			}
		}
	}
}

// TestContextSeries: each run_code's and each direct call's context economy adds to the
// context series by caller (tenant and agent only with TenantLabels); a program's binding
// call adds nothing of its own (its bytes are its execution's).
func TestContextSeries(t *testing.T) {
	for _, labels := range []bool{false, true} {
		m := New(&Options{TenantLabels: labels})
		m.Execution(acme, telemetry.Execution{Profile: "default", Outcome: "completed", Start: "warm",
			Context: telemetry.Context{BindingBytes: 50_000, ReturnedBytes: 400, KeptOutBytes: 49_600}})
		m.Execution(acme, telemetry.Execution{Profile: "default", Outcome: "completed", Start: "warm",
			Context: telemetry.Context{BindingBytes: 10, ReturnedBytes: 300}})
		m.Call(acme, telemetry.Call{Upstream: "docs", Outcome: "ok", Context: telemetry.Context{BindingBytes: 999, KeptOutBytes: 999}})
		m.Call(acme, telemetry.Call{Upstream: "docs", Outcome: "ok", Direct: true,
			Context: telemetry.Context{BindingBytes: 5 << 20, ReturnedBytes: 3000, KeptOutBytes: 5<<20 - 3000}})
		scope := ""
		if labels {
			scope = `agent="analyst",`
		}
		tenant := ""
		if labels {
			tenant = `,tenant="acme"`
		}
		body := scrape(t, m)
		for _, want := range []string{
			`mcp_sandbox_context_binding_bytes_total{` + scope + `caller="program"` + tenant + `} 50010`,
			`mcp_sandbox_context_returned_bytes_total{` + scope + `caller="program"` + tenant + `} 700`,
			`mcp_sandbox_context_kept_out_bytes_total{` + scope + `caller="program"` + tenant + `} 49600`,
			`mcp_sandbox_context_binding_bytes_total{` + scope + `caller="host"` + tenant + `} 5.24288e+06`,
			`mcp_sandbox_context_kept_out_bytes_total{` + scope + `caller="host"` + tenant + `} 5.23988e+06`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("tenant labels %v: exposition lacks %s", labels, want)
			}
		}
	}
}

// An execution under network rules counts its proxy's decisions, refusals by reason.
func TestEgressDecisions(t *testing.T) {
	m := New(nil)
	m.Execution(acme, telemetry.Execution{Profile: "p", Level: "isolated", Outcome: "completed", Start: "cold",
		EgressAllowed: 3, EgressRefused: map[string]int{"not_allowed": 2, "sni_mismatch": 1}})
	m.Execution(acme, telemetry.Execution{Profile: "p", Level: "isolated", Outcome: "completed", Start: "cold", EgressAllowed: 1})
	body := scrape(t, m)
	for _, want := range []string{
		`mcp_sandbox_egress_decisions_total{decision="allowed",reason=""} 4`,
		`mcp_sandbox_egress_decisions_total{decision="refused",reason="not_allowed"} 2`,
		`mcp_sandbox_egress_decisions_total{decision="refused",reason="sni_mismatch"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("exposition lacks %s", want)
		}
	}
}
