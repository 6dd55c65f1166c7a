package container

import (
	"slices"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
)

// For an engine elsewhere (a VM's) the run mounts nothing of this host, names no cgroup or
// RLIMIT_NPROC of this host's, keeps the container until its end is read (no --rm), and
// selects the standard-streams channel; everything else is as for a local engine.
func TestRemoteRunArguments(t *testing.T) {
	for _, kind := range []string{"podman", "docker"} {
		t.Run(kind, func(t *testing.T) {
			p := &plan{rt: &Runtime{Kind: kind, Remote: true}, name: "mcp-sandbox-o-t", owner: "o", image: "img", python: "/usr/bin/python3",
				uid: 65534, gid: 65534, workspace: "/workspace-t", remote: true, seccomp: "/var/lib/volumes/p/_data/ab.json",
				terms:          engine.Terms{Limits: engine.Limits{CPUSeconds: 2, WallSeconds: 9, MemoryBytes: 256 << 20, FileSizeBytes: 1 << 20, ProcessCount: 16}},
				workspaceBytes: 64 << 20, tmpBytes: 16 << 20, interpreter: []string{"-I", "-c", "SOURCE", "canary"}}
			a := p.args()
			joined := strings.Join(a, " ")
			for _, banned := range []string{"--rm", "--volume", "--cgroup-parent", "--cgroup-manager", "nproc="} {
				if strings.Contains(joined, banned) {
					t.Errorf("%s in %q", banned, a)
				}
			}
			for _, want := range []string{"--pull=never", "--network=none", "--read-only", "--cap-drop=all", "--security-opt=no-new-privileges",
				"seccomp=/var/lib/volumes/p/_data/ab.json", "--interactive", "--pids-limit"} {
				if !slices.Contains(a, want) && !strings.Contains(joined, want) {
					t.Errorf("missing %s in %q", want, a)
				}
			}
			if !slices.Equal(a[len(a)-2:len(a)-1], []string{streamsPathArg}) {
				t.Errorf("the bootstrap's channel argument is %q, want %q (the standard streams)", a[len(a)-2], streamsPathArg)
			}
		})
	}
}

// An engine elsewhere gets no RLIMIT_NPROC above the kernel's default pid_max as root there,
// and none at all rootless (its own limits bound it); an engine here gets this host's.
func TestRemoteNprocLimit(t *testing.T) {
	if n := nprocLimit(&Runtime{Remote: true}, 64); n != defaultPIDMax {
		t.Errorf("a rootful engine elsewhere: nproc %d, want %d", n, defaultPIDMax)
	}
	if n := nprocLimit(&Runtime{Remote: true, Rootless: true}, 64); n != 0 {
		t.Errorf("a rootless engine elsewhere: nproc %d, want the engine's own (0)", n)
	}
}
