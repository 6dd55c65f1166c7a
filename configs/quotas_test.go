package configs

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Quotas left out take their defaults, a tenant's never above the server's; what a config
// writes stands.
func TestQuotasDefaults(t *testing.T) {
	c, err := Parse(doc(
		"quotas: {max_concurrent_executions: 2, max_stored_bytes: 512MiB}",
		"tenants:",
		"  t: {agents: {a: {}}}",
		"  u:",
		"    policy: {quotas: {max_concurrent_executions: 1, queue_seconds: 0, max_sessions: 3, max_stored_bytes: 1MiB}}",
		"    agents: {a: {}}",
	), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := ServerQuotas{MaxConcurrentExecutions: Count(2), MaxSessions: Count(1024), MaxStoredBytes: Bytes(512 * MiB)}
	if diff := cmp.Diff(want, c.ServerQuotas()); diff != "" {
		t.Errorf("server (-want +got):\n%s", diff)
	}
	for tenant, want := range map[string]TenantQuotas{
		"t":       {MaxConcurrentExecutions: Count(2), QueueSeconds: Seconds(60), MaxSessions: Count(128), MaxStoredBytes: Bytes(512 * MiB)},
		"u":       {MaxConcurrentExecutions: Count(1), QueueSeconds: Seconds(0), MaxSessions: Count(3), MaxStoredBytes: Bytes(1 * MiB)},
		"unnamed": {MaxConcurrentExecutions: Count(2), QueueSeconds: Seconds(60), MaxSessions: Count(128), MaxStoredBytes: Bytes(512 * MiB)},
	} {
		if diff := cmp.Diff(want, c.TenantQuotas(tenant)); diff != "" {
			t.Errorf("tenant %s (-want +got):\n%s", tenant, diff)
		}
	}
	d := Default()
	if diff := cmp.Diff(DefaultServerQuotas(), d.ServerQuotas()); diff != "" {
		t.Errorf("default server (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(DefaultTenantQuotas(), d.TenantQuotas("local")); diff != "" {
		t.Errorf("default tenant (-want +got):\n%s", diff)
	}
}
