// Package metrics is the Prometheus side of telemetry.Metrics: the counters and histograms
// the server reports into, the gauges read at scrape time (warm children per profile, live
// upstream sessions, programs running and queued and sessions held under the quotas), and the /metrics handler in the Prometheus exposition format.
//
// It imports telemetry and github.com/prometheus/client_golang, and is imported by cmd only:
// mcpserver, binding and upstream report through telemetry.Reporter and never link Prometheus.
//
// Every series is named mcp_sandbox_… (see Metrics). Labels carry configured names (profile,
// upstream), levels, outcomes and failure kinds, never program text, arguments or secrets.
// tenant and agent are labels only with Options.TenantLabels: they multiply the series by the
// number of agents, and a scraper would learn every tenant's name and activity.
//
// A Metrics is safe for concurrent use; it owns a registry of its own (never Prometheus's
// global one), so two servers in one process, or two tests, do not share counters.
package metrics
