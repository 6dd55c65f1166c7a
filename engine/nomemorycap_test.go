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
