package container

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/mcp-sandbox/mcp-sandbox/internal/cgroup"
	"golang.org/x/sys/unix"
)

// What the backend reaches of this host when the engine runs here: the execution's cgroup,
// the runtime's CLI as a child that dies with the server, the kernel's limits. A remote
// engine (a VM's) gets none of it, whatever system the server runs on (host_other.go).

// installGuidance says what to install when no runtime answers.
const installGuidance = "apt-get install podman (or install docker and start its daemon)"

// monitorGroup is where podman (cgroupfs) puts its monitor under the cgroup parent it is given.
const monitorGroup = "conmon"

// HybridCgroups reports whether this host's cgroup layout is hybrid in the way crun refuses.
func HybridCgroups() bool { return cgroup.DetectLayout(cgroup.Root).Hybrid }

// hostCgroups says whether an engine on this host can nest containers under a cgroup the
// backend makes, and which layout it is ("v1" or "v2"), or why crun refuses it (hybrid).
func hostCgroups() (version string, hybrid bool, detail string) {
	l := cgroup.DetectLayout(cgroup.Root)
	version = "v1"
	if l.V2 {
		version = "v2"
	}
	return version, l.Hybrid, l.Detail
}

// newExecCgroup makes the execution's cgroup, which the runtime nests the container under.
func newExecCgroup(owner, tag string, memoryBytes int64) (execCgroup, error) {
	return cgroup.NewParent(cgroup.Base, cgroupName(owner, tag), monitorGroup, memoryBytes)
}

// installedCLI: on Linux a runtime's CLI is on PATH or named.
func installedCLI(kind string) (string, error) { return exec.LookPath(kind) }

// cgroupName is the execution cgroup's name for owner id and execution tag.
func cgroupName(id, tag string) string { return id + "-" + tag }

// cliAttr: the runtime's CLI leads a session of its own and dies with the server.
func cliAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
}

// hostNprocLimit is RLIMIT_NPROC for a container of an engine on this host. The pids limit
// bounds the execution; the kernel counts RLIMIT_NPROC per uid across the host, where other
// executions may share the uid, so it is set as high as it can usefully go: no more than the
// kernel's pid_max (a ceiling podman also puts on its monitor's hard limit, which the
// container inherits and cannot exceed), nor this process's own hard limit, nor what the
// grade accepts.
func hostNprocLimit(processCount int) uint64 {
	n := uint64(processCount) + 1<<16
	if b, err := os.ReadFile("/proc/sys/kernel/pid_max"); err == nil {
		if m, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && m > 0 {
			n = min(n, m)
		}
	}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &rl); err == nil {
		n = min(n, rl.Max)
	}
	return max(n, 1)
}
