package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
)

// Options configure New; nil means defaults.
type Options struct {
	// TenantLabels adds tenant and agent labels to the per-agent series (executions, calls,
	// budget refusals, approvals, kept outputs) and tenant to the upstream sessions.
	TenantLabels bool
	// Version is reported by mcp_sandbox_build_info.
	Version string
}

// Buckets of the latency histograms, in seconds: an execution takes from tens of milliseconds
// (a warm child, a short program) to its wall clock; a tool call from a millisecond (a
// built-in) to an upstream's timeout.
var (
	ExecutionBuckets = []float64{0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	CallBuckets      = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
)

// Metrics counts what the server reports (it implements telemetry.Metrics) and serves it.
type Metrics struct {
	reg    *prometheus.Registry
	tenant bool

	executions  *prometheus.CounterVec   // profile, level, outcome, kind
	execSeconds *prometheus.HistogramVec // profile, start
	egress      *prometheus.CounterVec   // decision, reason
	calls       *prometheus.CounterVec   // caller, upstream, outcome
	callSeconds *prometheus.HistogramVec // caller, upstream
	refusals    *prometheus.CounterVec   // meter, half
	approvals   *prometheus.CounterVec   // decision
	kept        *prometheus.CounterVec   // source
	keptBytes   *prometheus.CounterVec   // source
	ctxBinding  *prometheus.CounterVec   // caller
	ctxReturned *prometheus.CounterVec   // caller
	ctxKeptOut  *prometheus.CounterVec   // caller
}

var _ telemetry.Metrics = (*Metrics)(nil)

// New returns a Metrics with its own registry, which also holds the Go runtime's and the
// process's collectors.
func New(opts *Options) *Metrics {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	m := &Metrics{reg: prometheus.NewRegistry(), tenant: o.TenantLabels}
	labels := func(l ...string) []string {
		if m.tenant {
			return append([]string{"tenant", "agent"}, l...)
		}
		return l
	}
	// counter and histogram make a series labelled by labels and register it.
	counter := func(name, help string, l ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels(l...))
		m.reg.MustRegister(c)
		return c
	}
	histogram := func(name, help string, buckets []float64, l ...string) *prometheus.HistogramVec {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels(l...))
		m.reg.MustRegister(h)
		return h
	}
	m.executions = counter("mcp_sandbox_executions_total",
		"run_code executions that ended, by profile, isolation level reached (none: nothing ran), outcome (completed, failed, refused) and failure kind.",
		"profile", "level", "outcome", "kind")
	m.execSeconds = histogram("mcp_sandbox_execution_duration_seconds",
		"How long run_code executions took, by profile and start: warm (a child started ahead), cold (started for it), none (refused before a child started) or unknown (a remote backend).",
		ExecutionBuckets, "profile", "start")
	m.egress = counter("mcp_sandbox_egress_decisions_total",
		"What programs' egress proxies decided under network rules: allowed (a request forwarded, reason empty) or refused, by reason (not_allowed, denied, ip_literal, private_address, sni_mismatch, ...).",
		"decision", "reason")
	m.calls = counter("mcp_sandbox_tool_calls_total",
		"Tool calls that ended, by caller (program: a binding call; host: a direct call of an exposed tool), upstream (_builtin, _unknown) and outcome (ok or the failure kind).",
		"caller", "upstream", "outcome")
	m.callSeconds = histogram("mcp_sandbox_tool_call_duration_seconds",
		"How long tool calls took, refusals included, by caller and upstream.",
		CallBuckets, "caller", "upstream")
	m.refusals = counter("mcp_sandbox_budget_refusals_total",
		"Binding calls the budget refused before they were made, by the limit reached (meter) and whose (half: execution or run).",
		"meter", "half")
	m.approvals = counter("mcp_sandbox_approvals_total",
		"Decisions on calls that need a person's approval, in programs and direct: accepted, declined, cancelled, timed_out, failed (the host could not put the question), unasked (this host cannot ask: refused).",
		"decision")
	m.kept = counter("mcp_sandbox_handles_stored_total",
		"Outputs kept in the blob store under a handle, by source (output: a stream, value or artifact of an execution; binding: a binding result over the transfer allowance; direct: a host's direct call's result over the preview size).",
		"source")
	m.keptBytes = counter("mcp_sandbox_preserved_bytes_total",
		"Bytes kept in the blob store under handles, by source.",
		"source")
	m.ctxBinding = counter("mcp_sandbox_context_binding_bytes_total",
		"Bytes tools gave, by caller (program: what run_code programs received from their calls; host: direct calls' results): context.binding_bytes summed.",
		"caller")
	m.ctxReturned = counter("mcp_sandbox_context_returned_bytes_total",
		"Bytes of text the model read, by caller (program: run_code results; host: direct calls' results): context.returned_bytes summed.",
		"caller")
	m.ctxKeptOut = counter("mcp_sandbox_context_kept_out_bytes_total",
		"Bytes tools gave that were kept out of the model's context, by caller: context.kept_out_bytes summed (per execution or call, never below zero).",
		"caller")
	build := prometheus.NewGauge(prometheus.GaugeOpts{Name: "mcp_sandbox_build_info",
		Help: "Always 1; the version label says which build is running.", ConstLabels: prometheus.Labels{"version": o.Version}})
	build.Set(1)
	m.reg.MustRegister(build, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in the Prometheus exposition format (text, or protobuf and
// OpenMetrics when the scraper asks for them).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry is the registry the series live in, for a test to gather from.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

func (m *Metrics) values(s telemetry.Scope, v ...string) []string {
	if m.tenant {
		return append([]string{s.Tenant, s.Agent}, v...)
	}
	return v
}

// Execution counts one run_code and observes its duration.
func (m *Metrics) Execution(s telemetry.Scope, e telemetry.Execution) {
	m.executions.WithLabelValues(m.values(s, e.Profile, e.Level, e.Outcome, e.Kind)...).Inc()
	m.execSeconds.WithLabelValues(m.values(s, e.Profile, e.Start)...).Observe(e.Seconds)
	if e.EgressAllowed > 0 {
		m.egress.WithLabelValues(m.values(s, "allowed", "")...).Add(float64(e.EgressAllowed))
	}
	for reason, n := range e.EgressRefused {
		m.egress.WithLabelValues(m.values(s, "refused", reason)...).Add(float64(n))
	}
	m.context(s, "program", e.Context)
}

// context adds one run_code's or direct call's context economy.
func (m *Metrics) context(s telemetry.Scope, caller string, c telemetry.Context) {
	m.ctxBinding.WithLabelValues(m.values(s, caller)...).Add(float64(max(c.BindingBytes, 0)))
	m.ctxReturned.WithLabelValues(m.values(s, caller)...).Add(float64(max(c.ReturnedBytes, 0)))
	m.ctxKeptOut.WithLabelValues(m.values(s, caller)...).Add(float64(max(c.KeptOutBytes, 0)))
}

// Call counts one tool call and observes its duration.
func (m *Metrics) Call(s telemetry.Scope, c telemetry.Call) {
	caller := "program"
	if c.Direct {
		caller = "host"
	}
	m.calls.WithLabelValues(m.values(s, caller, c.Upstream, c.Outcome)...).Inc()
	m.callSeconds.WithLabelValues(m.values(s, caller, c.Upstream)...).Observe(c.Seconds)
	if c.Direct {
		m.context(s, caller, c.Context)
	}
}

// BudgetRefusal counts one refusal by the binding budget.
func (m *Metrics) BudgetRefusal(s telemetry.Scope, meter, half string) {
	m.refusals.WithLabelValues(m.values(s, meter, half)...).Inc()
}

// Approval counts one approval decision.
func (m *Metrics) Approval(s telemetry.Scope, decision string) {
	m.approvals.WithLabelValues(m.values(s, decision)...).Inc()
}

// Kept counts one output kept under a handle, and its bytes.
func (m *Metrics) Kept(s telemetry.Scope, source string, bytes int64) {
	m.kept.WithLabelValues(m.values(s, source)...).Inc()
	m.keptBytes.WithLabelValues(m.values(s, source)...).Add(float64(max(bytes, 0)))
}
