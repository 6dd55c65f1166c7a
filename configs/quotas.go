package configs

import "math"

// ServerQuotas bound what the whole server holds at once, every tenant together: the
// top-level `quotas:` block. A nil field means its default (DefaultServerQuotas).
type ServerQuotas struct {
	// MaxConcurrentExecutions is how many programs run at once in this process.
	MaxConcurrentExecutions *int `yaml:"max_concurrent_executions" json:"max_concurrent_executions"`
	// MaxSessions is how many MCP sessions this process holds at once: 2025-11-25 sessions
	// and 2026-07-28 (sessionless) requests in flight.
	MaxSessions *int `yaml:"max_sessions" json:"max_sessions"`
	// MaxStoredBytes is how many bytes the blob store may hold, every tenant together.
	MaxStoredBytes *ByteSize `yaml:"max_stored_bytes" json:"max_stored_bytes"`
}

// TenantQuotas bound what one tenant holds at once: `policy: {quotas: …}`. A nil field means
// its default (DefaultTenantQuotas), never more than the server's own quota.
type TenantQuotas struct {
	// MaxConcurrentExecutions is how many of the tenant's programs run at once; a run_code
	// past it waits for a slot.
	MaxConcurrentExecutions *int `yaml:"max_concurrent_executions" json:"max_concurrent_executions"`
	// QueueSeconds is how long a run_code waits for a slot, the tenant's and then the
	// server's, before it is refused with capacity_exceeded. 0 refuses at once.
	QueueSeconds *float64 `yaml:"queue_seconds" json:"queue_seconds"`
	// MaxSessions is how many MCP sessions the tenant holds at once, as for the server's.
	MaxSessions *int `yaml:"max_sessions" json:"max_sessions"`
	// MaxStoredBytes is how many bytes the tenant's kept outputs and large results may
	// occupy in the blob store; an output past it is kept as a preview only.
	MaxStoredBytes *ByteSize `yaml:"max_stored_bytes" json:"max_stored_bytes"`
}

// maxQueueSeconds bounds queue_seconds: a run_code waiting longer than an hour for a slot is
// a client that has long given up.
const maxQueueSeconds = 3600

// DefaultServerQuotas are the server's quotas where the config leaves them out: room for a
// few tenants' programs on a shared host (each up to its memory_bytes), far more sessions
// than one user opens, and a blob store that cannot fill a disk.
func DefaultServerQuotas() ServerQuotas {
	return ServerQuotas{
		MaxConcurrentExecutions: Count(8),
		MaxSessions:             Count(1024),
		MaxStoredBytes:          Bytes(8 * GiB),
	}
}

// DefaultTenantQuotas are a tenant's quotas where its policy leaves them out. A desktop user
// (one tenant) does not meet them in ordinary use: a fifth program at once waits rather than
// fails, and a minute covers two rounds of the default 30-second wall clock.
func DefaultTenantQuotas() TenantQuotas {
	return TenantQuotas{
		MaxConcurrentExecutions: Count(4),
		QueueSeconds:            Seconds(60),
		MaxSessions:             Count(128),
		MaxStoredBytes:          Bytes(1 * GiB),
	}
}

// ServerQuotas returns the server's quotas with defaults filled.
func (c *Config) ServerQuotas() ServerQuotas {
	q, d := c.Quotas, DefaultServerQuotas()
	orPtr(&q.MaxConcurrentExecutions, d.MaxConcurrentExecutions)
	orPtr(&q.MaxSessions, d.MaxSessions)
	orPtr(&q.MaxStoredBytes, d.MaxStoredBytes)
	return q
}

// TenantQuotas returns tenant's quotas with defaults filled; a default is never above the
// server's quota (an explicit value above it is a config error). A tenant the config does not
// name gets the defaults.
func (c *Config) TenantQuotas(tenant string) TenantQuotas {
	q, d, s := c.Tenants[tenant].Policy.Quotas, DefaultTenantQuotas(), c.ServerQuotas()
	orPtr(&q.MaxConcurrentExecutions, Count(min(*d.MaxConcurrentExecutions, *s.MaxConcurrentExecutions)))
	orPtr(&q.QueueSeconds, d.QueueSeconds)
	orPtr(&q.MaxSessions, Count(min(*d.MaxSessions, *s.MaxSessions)))
	orPtr(&q.MaxStoredBytes, Bytes(min(*d.MaxStoredBytes, *s.MaxStoredBytes)))
	return q
}

// serverQuotas checks the server's quotas: each count and size positive.
func (v *validator) serverQuotas(q ServerQuotas) {
	v.positive("quotas.max_concurrent_executions", q.MaxConcurrentExecutions)
	v.positive("quotas.max_sessions", q.MaxSessions)
	v.positive("quotas.max_stored_bytes", q.MaxStoredBytes)
}

// tenantQuotas checks a tenant's quotas: positive, queue_seconds from 0 to an hour, and none
// above the server's, which it could never reach (a mistake, said rather than ignored).
func (v *validator) tenantQuotas(at string, q TenantQuotas) {
	at += ".policy.quotas"
	s := v.c.ServerQuotas()
	above := func(key string, got, server int64) {
		if server > 0 && got > server {
			v.add(at+"."+key, "%d is more than the server's quotas.%s (%d), so it can never be reached; lower it, or raise quotas.%s", got, key, server, key)
		}
	}
	v.positive(at+".max_concurrent_executions", q.MaxConcurrentExecutions)
	if p := q.MaxConcurrentExecutions; p != nil {
		above("max_concurrent_executions", int64(*p), int64(*s.MaxConcurrentExecutions))
	}
	if w := q.QueueSeconds; w != nil && (math.IsNaN(*w) || *w < 0 || *w > maxQueueSeconds) {
		v.add(at+".queue_seconds", "must be from 0 (refuse at once when every slot is busy) to %d seconds, got %v", maxQueueSeconds, *w)
	}
	v.positive(at+".max_sessions", q.MaxSessions)
	if p := q.MaxSessions; p != nil {
		above("max_sessions", int64(*p), int64(*s.MaxSessions))
	}
	v.positive(at+".max_stored_bytes", q.MaxStoredBytes)
	if p := q.MaxStoredBytes; p != nil {
		above("max_stored_bytes", int64(*p), int64(*s.MaxStoredBytes))
	}
}
