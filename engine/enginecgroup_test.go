package engine

import (
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine/wire"
)

// An engine's cgroup that the host cannot read (a VM's) binds memory and the process count
// only where the probe saw its limit there, at most the terms': never assumed.
func TestEngineCgroupGradedFromTheProbe(t *testing.T) {
	terms := Terms{Limits: Limits{MemoryBytes: 256 << 20, ProcessCount: 64}}
	facts := Facts{EngineCgroup: true, MountBoundary: true, PIDNamespace: true, NetNamespace: true, HostUID: -1, RunAsUID: 65534}
	for _, c := range []struct {
		name            string
		memory, pids    int64
		memWant, pidWnt Grade
	}{
		{"limits seen within the terms", 256 << 20, 64, Enforced, Enforced},
		{"no limit (max)", -1, -1, Unavailable, Unavailable},
		{"unreadable", 0, 0, Unavailable, Unavailable},
		{"wider than the terms", 1 << 30, 4096, Unavailable, Unavailable},
	} {
		g := grade(wire.Probe{UID: 65534, Canary: "absent", Routes: "none", CgroupMemory: c.memory, CgroupPIDs: c.pids}, facts, terms, nil)
		if got := g.guarantees[DimMemory]; got != c.memWant {
			t.Errorf("%s: memory %s, want %s", c.name, got, c.memWant)
		}
		if got := g.guarantees[DimProcessCount]; got != c.pidWnt {
			t.Errorf("%s: process_count %s, want %s", c.name, got, c.pidWnt)
		}
	}
}
