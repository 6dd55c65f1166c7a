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
