//go:build linux

package cgroup

import "testing"

// The layout detection reads the mounts: a cgroup2 root is v2; v1 with a cgroup2 mount that
// holds controllers is the hybrid crun refuses.
func TestLayout(t *testing.T) {
	l := DetectLayout(Root)
	if l.V2 && l.Hybrid {
		t.Fatalf("both v2 and hybrid: %+v", l)
	}
	if l.Detail == "" {
		t.Errorf("no description of the layout: %+v", l)
	}
	if DetectLayout(t.TempDir()) != (Layout{Detail: "cgroup v1"}) {
		t.Errorf("a plain directory reads as %+v", DetectLayout(t.TempDir()))
	}
}
