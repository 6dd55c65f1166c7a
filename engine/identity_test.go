package engine

import (
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine/wire"
)

// probeOf is what a child inside a fresh user, mount, pid and network namespace reports:
// the canary out of reach, no route, no host listener, the limits of terms t in force.
func probeOf(uid int, t Terms) wire.Probe {
	lim := func(v int64) [2]int64 { return [2]int64{v, v} }
	return wire.Probe{UID: uid, Canary: "absent", Routes: "none", Rlimits: map[string][2]int64{
		"cpu": lim(int64(CPURlimit(t.CPUSeconds))), "as": lim(t.MemoryBytes), "fsize": lim(t.FileSizeBytes),
		"nproc": lim(int64(t.ProcessCount)), "nofile": lim(1024)}}
}

var boxed = Facts{MountBoundary: true, PIDNamespace: true, NetNamespace: true, UserNamespace: true, Seccomp: true}

// TestSameUIDBehindAKernelBoundary: an unprivileged host without subordinate ids runs the
// program as its own uid (0 inside its user namespace). The result says identity is
// unavailable, and the default (allow_same_uid false) accepts it only behind the whole
// boundary: a user, mount, pid and network namespace of its own. A subordinate uid is an
// identity of its own: enforced. RLIMIT_NPROC binds per namespace there: enforced.
func TestSameUIDBehindAKernelBoundary(t *testing.T) {
	terms := Terms{Limits: DefaultLimits, Network: NetworkNone, Isolation: LevelProcess}
	withNet := terms
	withNet.Network = NetworkUnrestricted
	noNetNS := boxed
	noNetNS.NetNamespace = false
	noUserNS := boxed
	noUserNS.UserNamespace = false
	for _, tc := range []struct {
		name     string
		uid      int
		facts    Facts
		terms    Terms
		identity Grade
		accepted bool // the default accepts the execution
	}{
		{"own uid inside the full boundary", 0, boxed, terms, Unavailable, true},
		{"subordinate uid inside the boundary", 65534, Facts{MountBoundary: true, PIDNamespace: true, NetNamespace: true,
			UserNamespace: true, RunAsUID: 65534}, terms, Enforced, true},
		{"own uid with the host's network", 0, noNetNS, withNet, Unavailable, false},
		{"root's uid 0 without a user namespace", 0, noUserNS, terms, Unavailable, false},
		{"own uid at the process level", 1000, Facts{HostUID: 1000, RunAsUID: 1000, Subreaper: true, SignalScoped: true}, terms, Unavailable, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gr := grade(probeOf(tc.uid, tc.terms), tc.facts, tc.terms, nil)
			if g := gr.guarantees.Get(DimIdentity); g != tc.identity {
				t.Errorf("identity graded %s, want %s", g, tc.identity)
			}
			if tc.facts.UserNamespace && gr.guarantees.Get(DimProcessCount) != Enforced {
				t.Errorf("process_count graded %s in a user namespace of its own, want enforced", gr.guarantees.Get(DimProcessCount))
			}
			r := &Runner{opts: RunnerOptions{IdentityAdvice: "give the user a subordinate range"}}
			unmet := r.unmet(tc.terms, gr)
			if accepted := len(unmet) == 0; accepted != tc.accepted {
				t.Fatalf("accepted %v, want %v (unmet %+v)", accepted, tc.accepted, unmet)
			}
			for _, u := range unmet {
				if u.Dimension == DimIdentity && !strings.Contains(u.Why, "subordinate range") {
					t.Errorf("the identity refusal does not carry the host's advice: %s", u.Why)
				}
			}
		})
	}
}

// TestSubreaperGrades: a subreaper keeps the tree only while the program cannot kill it, and
// nothing keeps it that cannot signal the program's processes at all.
func TestSubreaperGrades(t *testing.T) {
	terms := Terms{Limits: DefaultLimits, Network: NetworkNone, Isolation: LevelProcess}
	for _, tc := range []struct {
		name  string
		uid   int
		facts Facts
		want  Grade
	}{
		{"another uid", 65534, Facts{HostUID: 0, RunAsUID: 65534, Subreaper: true}, Enforced},
		{"same uid under a Landlock signal scope", 1000, Facts{HostUID: 1000, RunAsUID: 1000, Subreaper: true, SignalScoped: true}, Enforced},
		{"same uid, nothing keeps its signals in", 1000, Facts{HostUID: 1000, RunAsUID: 1000, Subreaper: true}, Unverified},
		{"a process group alone", 1000, Facts{HostUID: 1000, RunAsUID: 1000}, Unavailable},
		{"another uid the host cannot signal (no CAP_KILL)", 65534, Facts{HostUID: 0, RunAsUID: 65534, Subreaper: true, Unkillable: true}, Unavailable},
		{"a v1 cgroup the host cannot signal (no CAP_KILL)", 65534, Facts{HostUID: 0, RunAsUID: 65534, Cgroup: true, Unkillable: true}, Unavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if g := grade(probeOf(tc.uid, terms), tc.facts, terms, nil).guarantees.Get(DimProcessTree); g != tc.want {
				t.Errorf("process_tree graded %s, want %s", g, tc.want)
			}
		})
	}
}

// TestEscapedTreeIsNeverClean: a tree its subreaper did not report dead turns a clean
// result into a failure, and says so beside any failure it already had.
func TestEscapedTreeIsNeverClean(t *testing.T) {
	clean := &Outcome{Value: []byte("42"), Guarantees: Guarantees{DimProcessTree: Enforced}}
	escaped(clean, "")
	if clean.Failure == nil || clean.Failure.Kind != "protocol_violation" || !clean.Failure.Executed || string(clean.Value) != "null" {
		t.Fatalf("a clean result with an escaped tree: failure %+v value %s", clean.Failure, clean.Value)
	}
	if clean.Guarantees[DimProcessTree] != Unavailable {
		t.Errorf("process_tree %s, want unavailable", clean.Guarantees[DimProcessTree])
	}
	timedOut := &Outcome{Failure: &Failure{Kind: "timeout", Executed: true, Message: "the program did not finish"}, Guarantees: Guarantees{}}
	escaped(timedOut, "")
	if timedOut.Failure.Kind != "timeout" || !strings.Contains(timedOut.Failure.Message, "outlived") {
		t.Errorf("a timeout with an escaped tree: %+v", timedOut.Failure)
	}
}
