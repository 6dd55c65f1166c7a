package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// WarmPool reports, at every scrape, how many started children profile keeps idle (idle is
// called then, and must be quick and safe for concurrent use).
func (m *Metrics) WarmPool(profile string, idle func() int) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mcp_sandbox_warm_children",
		Help:        "Started, graded children kept idle for the next execution, by profile.",
		ConstLabels: prometheus.Labels{"profile": profile}},
		func() float64 { return float64(idle()) }))
}

// UpstreamState is one tenant's client session to one upstream server.
type UpstreamState struct {
	Tenant, Upstream string
	Connected        bool
}

// Upstreams reports, at every scrape, the upstream sessions states returns: per upstream, how
// many tenants' pools hold a live session to it (0 or 1 per tenant with TenantLabels).
func (m *Metrics) Upstreams(states func() []UpstreamState) {
	labels := []string{"upstream"}
	if m.tenant {
		labels = []string{"tenant", "upstream"}
	}
	m.reg.MustRegister(&upstreamCollector{m: m, states: states, desc: prometheus.NewDesc("mcp_sandbox_upstream_sessions",
		"Live MCP client sessions to each upstream server (one per tenant granted it, at most; a session is opened when a turn first needs the server and dropped when its connection fails).",
		labels, nil)})
}

type upstreamCollector struct {
	m      *Metrics
	states func() []UpstreamState
	desc   *prometheus.Desc
}

func (c *upstreamCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *upstreamCollector) Collect(ch chan<- prometheus.Metric) {
	type key struct{ tenant, upstream string }
	sum := map[key]float64{}
	var order []key
	for _, s := range c.states() {
		k := key{upstream: s.Upstream}
		if c.m.tenant {
			k.tenant = s.Tenant
		}
		if _, seen := sum[k]; !seen {
			order = append(order, k)
			sum[k] = 0
		}
		if s.Connected {
			sum[k]++
		}
	}
	for _, k := range order {
		v := []string{k.upstream}
		if c.m.tenant {
			v = []string{k.tenant, k.upstream}
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, sum[k], v...)
	}
}

// Load is what one tenant holds now: programs running, programs waiting for a slot, and MCP
// sessions (2025-11-25 sessions, and 2026-07-28 requests in flight).
type Load struct {
	Tenant                    string
	Running, Queued, Sessions int
}

// Quotas reports, at every scrape, what loads returns: per tenant with TenantLabels, else the
// server's totals, as mcp_sandbox_executions_running, mcp_sandbox_executions_queued and
// mcp_sandbox_sessions.
func (m *Metrics) Quotas(loads func() []Load) {
	labels := []string(nil)
	if m.tenant {
		labels = []string{"tenant"}
	}
	desc := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, labels, nil) }
	m.reg.MustRegister(&loadCollector{m: m, loads: loads,
		running:  desc("mcp_sandbox_executions_running", "Programs running now, each holding one of its tenant's and one of the server's execution slots."),
		queued:   desc("mcp_sandbox_executions_queued", "run_code calls waiting for a free execution slot (refused with capacity_exceeded when the tenant's queue_seconds pass)."),
		sessions: desc("mcp_sandbox_sessions", "MCP sessions held over HTTP: 2025-11-25 sessions and 2026-07-28 requests in flight."),
	})
}

type loadCollector struct {
	m                         *Metrics
	loads                     func() []Load
	running, queued, sessions *prometheus.Desc
}

func (c *loadCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.running
	ch <- c.queued
	ch <- c.sessions
}

func (c *loadCollector) Collect(ch chan<- prometheus.Metric) {
	emit := func(l Load, v ...string) {
		ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(l.Running), v...)
		ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(l.Queued), v...)
		ch <- prometheus.MustNewConstMetric(c.sessions, prometheus.GaugeValue, float64(l.Sessions), v...)
	}
	var total Load
	for _, l := range c.loads() {
		if c.m.tenant {
			emit(l, l.Tenant)
			continue
		}
		total.Running += l.Running
		total.Queued += l.Queued
		total.Sessions += l.Sessions
	}
	if !c.m.tenant {
		emit(total)
	}
}
