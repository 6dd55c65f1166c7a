package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestNoMemoryCap: a seatbelt child on macOS (own uid, allow_same_uid set, no address-space
// limit, the canary out of reach without a mount boundary) is graded as the specification
// has it (filesystem unverified, memory unavailable, process tree unavailable) and runs at the
// process level; the same child is refused the isolated level with the memory reason among
// the others; and a Linux child that merely lacks the memory limit is still refused.
func TestNoMemoryCap(t *testing.T) {
	process := Terms{Limits: DefaultLimits, Network: NetworkNone, Isolation: LevelProcess}
	isolated := process
	isolated.Isolation = LevelIsolated
	probe := probeOf(501, process)
	delete(probe.Rlimits, "as")
	probe.Routes = "unknown"
	mac := Facts{HostUID: 501, RunAsUID: 501, NoMemoryCap: true}

	gr := grade(probe, mac, process, nil)
	want := map[Dimension]Grade{DimFilesystem: Unverified, DimMemory: Unavailable, DimIdentity: Unavailable,
		DimProcessTree: Unavailable, DimNetwork: Unverified, DimCPU: Enforced, DimFileSize: Enforced}
	got := map[Dimension]Grade{}
	for d := range want {
		got[d] = gr.guarantees.Get(d)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("grades (-want +got):\n%s", diff)
	}
	r := &Runner{opts: RunnerOptions{AllowSameUID: true}}
	if unmet := r.unmet(process, gr); len(unmet) != 0 {
		t.Errorf("the process level is refused without a memory cap the platform cannot have: %+v", unmet)
	}
	if unmet := r.unmet(isolated, grade(probe, mac, isolated, nil)); !hasDim(unmet, DimMemory) || !hasDim(unmet, DimFilesystem) {
		t.Errorf("the isolated level must be refused for memory and filesystem, unmet %+v", unmet)
	}
	linux := mac
	linux.NoMemoryCap = false
	if unmet := r.unmet(process, grade(probe, linux, process, nil)); !hasDim(unmet, DimMemory) {
		t.Errorf("a backend that could cap memory and did not must be refused, unmet %+v", unmet)
	}
}

func hasDim(reqs []Requirement, d Dimension) bool {
	for _, r := range reqs {
		if r.Dimension == d {
			return true
		}
	}
	return false
}

// TestGradedAndLacking: a Windows child (no uid, no rlimits, the canary readable) takes the
// grades its backend established with hostile children (Facts.Graded) in place of the
// probe's rlimits, runs at the process level without what the platform lacks, and is still
// refused the isolated level for it; a dimension not declared lacking is still required.
func TestGradedAndLacking(t *testing.T) {
	process := Terms{Limits: DefaultLimits, Network: NetworkNone, Isolation: LevelProcess}
	isolated := process
	isolated.Isolation = LevelIsolated
	probe := probeOf(-1, process)
	probe.Rlimits = nil
	probe.Canary = "readable"
	win := Facts{HostUID: -1, RunAsUID: -1,
		Graded: Guarantees{DimProcessTree: Enforced, DimCPU: Unverified, DimMemory: Unavailable,
			DimProcessCount: Unavailable, DimIdentity: Unavailable, DimFilesystem: Unavailable},
		Lacking: []Dimension{DimIdentity, DimFileSize, DimMemory, DimCPU}}
	gr := grade(probe, win, process, nil)
	for d, want := range map[Dimension]Grade{DimProcessTree: Enforced, DimCPU: Unverified, DimMemory: Unavailable,
		DimFileSize: Unavailable, DimIdentity: Unavailable, DimFilesystem: Unavailable, DimWallClock: Enforced} {
		if got := gr.guarantees.Get(d); got != want {
			t.Errorf("%s graded %s, want %s", d, got, want)
		}
	}
	r := &Runner{}
	if unmet := r.unmet(process, gr); len(unmet) != 0 {
		t.Errorf("the process level is refused for what the platform lacks: %+v", unmet)
	}
	if unmet := r.unmet(isolated, grade(probe, win, isolated, nil)); !hasDim(unmet, DimMemory) || !hasDim(unmet, DimIdentity) {
		t.Errorf("the isolated level must be refused for memory and identity, unmet %+v", unmet)
	}
	partial := win
	partial.Lacking = []Dimension{DimIdentity, DimFileSize}
	if unmet := r.unmet(process, grade(probe, partial, process, nil)); !hasDim(unmet, DimCPU) || !hasDim(unmet, DimMemory) {
		t.Errorf("cpu and memory not declared lacking must still be required, unmet %+v", unmet)
	}
}
