package engine

import (
	"testing"
)

// TestCPULimitKillVerdict: whether an exit is the CPU limit's, on exits as backends report
// them. The figures are measured: on a loaded 2-core machine a program the kernel killed at
// RLIMIT_CPU = 2 s by its clock showed 1.42 s of CPU by rusage.
func TestCPULimitKillVerdict(t *testing.T) {
	killed, xcpu := signalKill, signalCPU // as Exit.Signal carries them (platform_unix.go)
	bwrap := Facts{PIDNamespace: true, InterpreterIsInit: true}
	cases := []struct {
		name  string
		exit  Exit
		facts Facts
		tree  TreeUsage
		want  bool
	}{
		{"killed at the limit under load: rusage far below it", Exit{Code: -1, Signal: killed, CPUSeconds: 1.42, RlimitCPUSeconds: 2.004}, Facts{}, TreeUsage{}, true},
		{"killed at the limit on an idle machine", Exit{Code: -1, Signal: killed, CPUSeconds: 1.98, RlimitCPUSeconds: 2.001}, Facts{}, TreeUsage{}, true},
		{"killed itself just before the limit", Exit{Code: -1, Signal: killed, CPUSeconds: 1.9, RlimitCPUSeconds: 1.9}, Facts{}, TreeUsage{}, false},
		{"killed itself well before the limit", Exit{Code: -1, Signal: killed, CPUSeconds: 0.3, RlimitCPUSeconds: 0.31}, Facts{}, TreeUsage{}, false},
		{"SIGXCPU is the limit's", Exit{Code: -1, Signal: xcpu, CPUSeconds: 1.5, RlimitCPUSeconds: 2}, Facts{}, TreeUsage{}, true},
		{"another signal past the limit is not", Exit{Code: -1, Signal: "segmentation fault", CPUSeconds: 2.1, RlimitCPUSeconds: 2.1}, Facts{}, TreeUsage{}, false},
		{"an exit status is not", Exit{Code: 1, CPUSeconds: 2.1, RlimitCPUSeconds: 2.1}, Facts{}, TreeUsage{}, false},
		{"init of its namespace, under load", Exit{Code: -1, Signal: killed, CPUSeconds: 1.42}, bwrap, TreeUsage{}, true},
		{"init of its namespace, OOM-killed", Exit{Code: -1, Signal: killed, CPUSeconds: 0.4}, bwrap, TreeUsage{OOMKilled: true}, false},
		{"no clock, rusage near the limit", Exit{Code: -1, Signal: killed, CPUSeconds: 1.8}, Facts{}, TreeUsage{}, true},
		{"no clock, rusage well below the limit", Exit{Code: -1, Signal: killed, CPUSeconds: 0.5}, Facts{}, TreeUsage{}, false},
	}
	for _, c := range cases {
		if got := cpuLimitKill(&c.exit, c.facts, c.tree, 2); got != c.want {
			t.Errorf("%s: %+v → CPU limit %v, want %v", c.name, c.exit, got, c.want)
		}
	}
}
