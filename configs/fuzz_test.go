package configs

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: no input makes Parse panic, and whatever it accepts is valid and hashable.
func FuzzParse(f *testing.F) {
	f.Add(DefaultYAML())
	seeds, _ := filepath.Glob(filepath.Join("examples", "*.yaml"))
	tenantSeeds, _ := filepath.Glob(filepath.Join("examples", "tenants", "*.yaml"))
	for _, s := range append(seeds, tenantSeeds...) {
		if data, err := os.ReadFile(s); err == nil {
			f.Add(data)
		}
	}
	for _, s := range []string{
		"", "~", "---\n---\n", "[]", "a: &a [*a]", "profiles: {default: {hard_limits: {memory_bytes: 1.5GiB}}}",
		"tenants: {t: {agents: {a: {code_execution: {bindings: [x__*]}}}}}",
		"sandbox: {}\ntenants: {t: {agents: {a: {code_execution: {}}}}}",
		"x: !!binary aGVsbG8=", "? [a]\n: b", "<<: {a: 1}", "profiles: {default: !!map {}}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "fuzz.yaml")
		if err != nil {
			_ = err.Error()
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted a config Validate rejects: %v", err)
		}
		for tn, tenant := range c.Tenants {
			for an := range tenant.Agents {
				if _, err := c.AgentVersion(tn, an); err != nil {
					t.Fatalf("AgentVersion(%q, %q): %v", tn, an, err)
				}
			}
		}
	})
}
