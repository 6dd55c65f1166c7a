package engine

import (
	"strings"
	"testing"
)

func TestSelectLocal(t *testing.T) {
	all := []LocalBackend{
		{Name: "process", Isolation: LevelProcess, Available: true},
		{Name: "bwrap", Isolation: LevelIsolated, Available: true},
		{Name: "namespaces", Isolation: LevelIsolated, Available: true},
	}
	noNS := []LocalBackend{all[0], all[1], {Name: "namespaces", Isolation: LevelIsolated, Reason: "user namespaces are disabled"}}
	none := []LocalBackend{all[0], {Name: "bwrap", Isolation: LevelIsolated, Reason: "bwrap not found: apt-get install bubblewrap"},
		{Name: "namespaces", Isolation: LevelIsolated, Reason: "user namespaces are disabled"}}
	for _, tc := range []struct {
		name  string
		found []LocalBackend
		level Level
		want  string
	}{
		{"strongest isolated", all, LevelIsolated, "namespaces"},
		{"strongest for process too", all, LevelProcess, "namespaces"},
		{"bwrap when namespaces are out", noNS, LevelIsolated, "bwrap"},
		{"process level falls to process", none, LevelProcess, "process"},
		{"nothing isolated", none, LevelIsolated, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SelectLocal(tc.found, tc.level)
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), "apt-get install bubblewrap") || !strings.Contains(err.Error(), "process: reaches only process") {
					t.Fatalf("got %v, %v; want an error with install guidance", got, err)
				}
				return
			}
			if err != nil || got.Name != tc.want {
				t.Fatalf("got %v, %v; want %s", got, err, tc.want)
			}
		})
	}
}
