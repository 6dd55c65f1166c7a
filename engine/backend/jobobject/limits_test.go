package jobobject

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
)

func TestLimitsFor(t *testing.T) {
	base := uint32(limitKillOnJobClose | limitDieOnUnhandledException)
	for _, tc := range []struct {
		name string
		in   engine.Limits
		want Limits
	}{
		{"none set: kill-on-close alone", engine.Limits{}, Limits{Flags: base}},
		{"the defaults", engine.DefaultLimits, Limits{Flags: base | limitJobTime | limitJobMemory | limitActiveProcess,
			JobTime: 100_000_000, JobMemory: 512 << 20, ActiveProcesses: 64}},
		{"a fraction of a second rounds up", engine.Limits{CPUSeconds: 0.25}, Limits{Flags: base | limitJobTime, JobTime: 2_500_000}},
		{"the wall clock and file size are not the job's", engine.Limits{WallSeconds: 5, FileSizeBytes: 1 << 20}, Limits{Flags: base}},
	} {
		if diff := cmp.Diff(tc.want, LimitsFor(tc.in)); diff != "" {
			t.Errorf("%s: (-want +got)\n%s", tc.name, diff)
		}
	}
}

func TestLimitHit(t *testing.T) {
	for _, tc := range []struct {
		msgs []uint32
		want engine.LimitName
	}{
		{nil, ""},
		{[]uint32{msgNewProcess, msgExitProcess, msgActiveProcessZero}, ""},
		{[]uint32{msgNewProcess, msgAbnormalExit, msgActiveProcessZero}, ""},
		{[]uint32{msgNewProcess, msgEndOfJobTime, msgActiveProcessZero}, engine.LimitCPU},
		{[]uint32{msgNewProcess, msgJobMemoryLimit, msgExitProcess}, engine.LimitMemory},
		{[]uint32{msgNewProcess, msgActiveProcessLimit, msgJobMemoryLimit}, engine.LimitProcessCount},
	} {
		if got := LimitHit(tc.msgs); got != tc.want {
			t.Errorf("LimitHit(%v) = %q, want %q", tc.msgs, got, tc.want)
		}
	}
}

// A limit the platform was not seen enforcing is never graded enforced; identity and the
// file system are unavailable whatever held.
func TestGrades(t *testing.T) {
	all := Enforcement{KillOnClose: true, CPU: true, Memory: true, ProcessCount: true}
	if diff := cmp.Diff(engine.Guarantees{engine.DimProcessTree: engine.Enforced, engine.DimCPU: engine.Enforced,
		engine.DimMemory: engine.Enforced, engine.DimProcessCount: engine.Enforced,
		engine.DimIdentity: engine.Unavailable, engine.DimFilesystem: engine.Unavailable}, all.Grades()); diff != "" {
		t.Errorf("all held: (-want +got)\n%s", diff)
	}
	metered := Enforcement{KillOnClose: true, CPUMeter: true}
	if g := metered.Grades().Get(engine.DimCPU); g != engine.Unverified {
		t.Errorf("the host's meter alone ended the busy loop: cpu graded %s, want unverified", g)
	}
	if diff := cmp.Diff([]engine.Dimension{engine.DimIdentity, engine.DimFileSize, engine.DimCPU, engine.DimMemory}, metered.Lacking()); diff != "" {
		t.Errorf("lacking under the meter: (-want +got)\n%s", diff)
	}
	if diff := cmp.Diff([]engine.Dimension{engine.DimIdentity, engine.DimFileSize}, all.Lacking()); diff != "" {
		t.Errorf("lacking where all held: (-want +got)\n%s", diff)
	}
	none := Enforcement{}.Grades()
	for d, g := range none {
		if g != engine.Unavailable {
			t.Errorf("nothing held, yet %s is %s", d, g)
		}
	}
}
