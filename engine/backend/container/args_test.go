//go:build linux

package container

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"golang.org/x/sys/unix"
)

func testPlan(kind string) *plan {
	return &plan{
		rt: &Runtime{Kind: kind, OCIRuntime: "runc"}, name: "mcp-sandbox-o-t", owner: "o", image: "img", python: "/usr/bin/python3",
		uid: 100001, gid: 100002, workspace: "/workspace-t", execDir: "/tmp/x/t",
		terms: engine.Terms{Limits: engine.Limits{CPUSeconds: 2.5, WallSeconds: 9, MemoryBytes: 256 << 20, FileSizeBytes: 1 << 20,
			ProcessCount: 16}, Network: engine.NetworkNone},
		workspaceBytes: 64 << 20, tmpBytes: 16 << 20, allowed: map[string]string{"API_TOKEN": "s3cret"},
		interpreter: []string{"-I", "-c", "SOURCE", "canary"}, nproc: 32768, seccomp: "/tmp/x/seccomp-network-none.json",
	}
}

// has reports whether args holds want as consecutive elements.
func has(args []string, want ...string) bool {
	for i := range args {
		if i+len(want) <= len(args) && slices.Equal(args[i:i+len(want)], want) {
			return true
		}
	}
	return false
}

// The run's arguments carry every mechanism the package promises, for podman and docker, and
// never an allowlisted variable's value (a command line is readable by every local account).
func TestRunArguments(t *testing.T) {
	for _, kind := range []string{"podman", "docker"} {
		t.Run(kind, func(t *testing.T) {
			p := testPlan(kind)
			a := p.args()
			for _, want := range [][]string{
				{"run", "--rm", "--interactive", "--pull=never"},
				{"--network=none"}, {"--read-only"}, {"--cap-drop=all"}, {"--security-opt=no-new-privileges"},
				{"--user", "100001:100002"}, {"--label", OwnerLabel + "=o"}, {"--name", "mcp-sandbox-o-t"},
				{"--log-driver=none"}, {"--workdir", "/workspace-t"}, {"--volume", "/tmp/x/t:/run/mcp-sandbox:ro,z"},
				{"--ulimit", "cpu=3:4"}, {"--ulimit", "data=268435456:268435456"}, {"--ulimit", "fsize=1048576:1048576"},
				{"--ulimit", "nofile=1024:1024"}, {"--ulimit", "nproc=32768:32768"}, {"--ulimit", "core=0:0"},
				{"--security-opt", "seccomp=/tmp/x/seccomp-network-none.json"},
				{"--pids-limit", "16"}, {"--memory", "268435456", "--memory-swap", "268435456"},
				{"--env", "HOME=/workspace-t"}, {"--env", "PYTHONDONTWRITEBYTECODE=1"}, {"--env", "API_TOKEN"},
				{"--entrypoint", "/usr/bin/python3", "img", "-I", "-c", "SOURCE", "canary", "/run/mcp-sandbox/channel.sock",
					"HOME,TMPDIR,PATH,PYTHONDONTWRITEBYTECODE,LC_CTYPE,API_TOKEN"},
			} {
				if !has(a, want...) {
					t.Errorf("missing %q in %q", want, a)
				}
			}
			if strings.Contains(strings.Join(a, " "), "s3cret") {
				t.Errorf("an allowlisted value is on the command line: %q", a)
			}
			podman := kind == "podman"
			if has(a, "--unsetenv-all") != podman || has(a, "--read-only-tmpfs=false") != podman || has(a, "--http-proxy=false") != podman {
				t.Errorf("podman's own flags present=%v in %q", !podman, a)
			}
			ws := "/workspace-t:rw,nosuid,nodev,size=67108864,mode=0700,uid=100001,gid=100002"
			if podman {
				ws = "/workspace-t:rw,nosuid,nodev,size=67108864,mode=0700,U"
				if !slices.Equal(a[:3], []string{"--log-level=error", "--runtime", "runc"}) {
					t.Errorf("podman's global flags: %q", a[:3])
				}
			} else if !has(a, "--runtime", "runc") || slices.Index(a, "--runtime") < slices.Index(a, "run") {
				t.Errorf("docker takes --runtime after run: %q", a)
			}
			if !has(a, "--tmpfs", ws) {
				t.Errorf("workspace tmpfs %q missing in %q", ws, a)
			}

			// RLIMIT_DATA never goes below what the OCI runtime's init needs.
			p.terms.MemoryBytes = 32 << 20
			if a := p.args(); !has(a, "--ulimit", "data=134217728:134217728") || !has(a, "--memory", "33554432") {
				t.Errorf("a small memory limit: %q", a)
			}

			// With the execution cgroup the memory limit is the cgroup's, not the runtime's;
			// with network granted there is no --network=none.
			p.cgroupParent, p.terms.Network = "/mcp-sandbox/ctr-o-t", engine.NetworkUnrestricted
			a = p.args()
			if !has(a, "--cgroup-parent", "/mcp-sandbox/ctr-o-t") || has(a, "--memory", "33554432") || has(a, "--network=none") {
				t.Errorf("with a cgroup parent and network: %q", a)
			}
			if podman && !has(a, "--cgroup-manager=cgroupfs") {
				t.Errorf("podman is not told to use cgroupfs with a cgroup path: %q", a)
			}

			// A user namespace of the execution's own maps the container's ids 0-65535 to its
			// block; without one, no map.
			if has(a, "--uidmap") || has(a, "--gidmap") {
				t.Errorf("an id map without a block: %q", a)
			}
			p.usernsFirst = usernsFirst + 3*usernsBlock
			if a := p.args(); !has(a, "--uidmap", "0:1610809344:65536", "--gidmap", "0:1610809344:65536") {
				t.Errorf("the execution's id map: %q", a)
			}

			// The channel over the standard streams mounts nothing and names "-" as the socket.
			p.execDir = ""
			a = p.args()
			if slices.Contains(a, "--volume") || !has(a, "canary", "-", "HOME,TMPDIR,PATH,PYTHONDONTWRITEBYTECODE,LC_CTYPE,API_TOKEN") ||
				!has(a, "--interactive") {
				t.Errorf("the stream channel's arguments: %q", a)
			}
		})
	}
}

// The refusal for a missing image names the exact command: for the image `mcp-sandbox image
// build` makes, that command (no source tree needed), with the tag and runtime asked for.
func TestImageGuidance(t *testing.T) {
	rt := &Runtime{Kind: "podman"}
	if g := ImageGuidance(rt, "python@sha256:"+strings.Repeat("0", 64)); !strings.Contains(g, `run "podman pull python@sha256:`) {
		t.Errorf("guidance for a digest: %s", g)
	}
	if g := ImageGuidance(rt, DefaultImage); !strings.Contains(g, `run "mcp-sandbox image build" (`) || !strings.Contains(g, "never pulled") {
		t.Errorf("guidance for the default image: %s", g)
	}
	if g := ImageGuidance(&Runtime{Kind: "docker"}, DefaultImageName+":1.2"); !strings.Contains(g, `"mcp-sandbox image build --runtime docker --tag `+DefaultImageName+`:1.2"`) {
		t.Errorf("guidance for another tag under docker: %s", g)
	}
}

// Leased blocks of host ids never overlap while held, lie in their range, and come free when
// released (the flock is the whole record, so a dead holder's come free too).
func TestIDBlocksExclusive(t *testing.T) {
	old := usernsDir
	usernsDir = filepath.Join(t.TempDir(), "userns")
	t.Cleanup(func() { usernsDir = old })
	held := map[uint32]*idBlock{}
	for i := 0; i < 64; i++ {
		b, err := leaseIDBlock()
		if err != nil {
			t.Fatal(err)
		}
		if held[b.First] != nil {
			t.Fatalf("block %d leased twice", b.First)
		}
		if b.First < usernsFirst || b.First >= usernsFirst+usernsBlocks*usernsBlock || (b.First-usernsFirst)%usernsBlock != 0 {
			t.Fatalf("block %d outside the range", b.First)
		}
		held[b.First] = b
	}
	for first, b := range held {
		b.Release()
		f, err := os.OpenFile(filepath.Join(usernsDir, strconv.Itoa(int((first-usernsFirst)/usernsBlock))), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			t.Errorf("block %d still locked after its release: %v", first, err)
		}
		f.Close()
	}
}
