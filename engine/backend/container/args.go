package container

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/internal/launch/seccomp"
	"github.com/mcp-sandbox/mcp-sandbox/internal/spawn"
)

// channelDir is where the execution's socket directory appears inside the container.
const channelDir = "/run/mcp-sandbox"

// channelSocket is the socket's name in that directory.
const channelSocket = "channel.sock"

// minDataLimit is the least RLIMIT_DATA a container gets: the OCI runtime's init (a Go
// program, under the limit before it execs the interpreter) fails to start below about 70 MiB.
const minDataLimit = 128 << 20

// plan is everything one `run` is made of; args turns it into the CLI's arguments.
type plan struct {
	rt        *Runtime
	name      string // the container's name
	owner     string
	image     string
	python    string
	uid, gid  int
	terms     engine.Terms
	workspace string // the workspace's path inside the container, fresh per execution
	execDir   string // the host directory mounted at channelDir; "" when the channel is the standard streams
	// cgroupParent nests the container under the execution's cgroup, which then carries the
	// memory limit; "" leaves the limit to the runtime's --memory.
	cgroupParent             string
	workspaceBytes, tmpBytes int64
	// allowed are the env_allowlist variables: passed by name, their values travel in the
	// CLI's own environment, never on its command line (which any local account can read).
	allowed map[string]string
	// interpreter is the interpreter's argv after the interpreter itself.
	interpreter []string
	nproc       uint64 // 0: the engine's own
	// seccomp is the policy's profile for these terms (seccomp.OCIProfile): a file the CLI
	// reads (docker's sends its content), or one on the engine's host (podman's).
	seccomp string
	// remote: the engine runs the container in a VM or on another machine. The container is
	// not removed when it ends (`run` without --rm): its end is read through the engine
	// (inspect: an OOM kill) before Close removes it.
	remote bool
	// usernsFirst, when not 0, is the first host id of the block the container's ids 0-65535
	// map to: a user namespace of the execution's own.
	usernsFirst uint32
}

// env is the child's environment as NAME=VALUE for the fixed variables and NAME alone for
// the allowlisted ones, and the names the bootstrap keeps.
func (p *plan) env() (flags []string, keep []string) {
	for _, kv := range spawn.Env(p.workspace, nil) {
		flags = append(flags, "--env", kv)
		name, _, _ := strings.Cut(kv, "=")
		keep = append(keep, name)
	}
	names := make([]string, 0, len(p.allowed))
	for n := range p.allowed {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		flags = append(flags, "--env", n)
		keep = append(keep, n)
	}
	return flags, keep
}

// args are the CLI's arguments for one execution.
func (p *plan) args() []string {
	podman := p.rt.Kind == "podman"
	var a []string
	if podman {
		a = append(a, "--log-level=error")
		if p.cgroupParent != "" {
			a = append(a, "--cgroup-manager=cgroupfs")
		}
		if p.rt.OCIRuntime != "" {
			a = append(a, "--runtime", p.rt.OCIRuntime)
		}
	}
	a = append(a, "run")
	if !p.remote {
		a = append(a, "--rm")
	}
	a = append(a, "--interactive", "--pull=never",
		"--name", p.name, "--label", OwnerLabel+"="+p.owner,
		"--log-driver=none", "--hostname=sandbox",
		"--user", strconv.Itoa(p.uid)+":"+strconv.Itoa(p.gid),
		"--cap-drop=all", "--security-opt=no-new-privileges", "--security-opt", "seccomp="+p.seccomp,
		"--read-only")
	if p.usernsFirst != 0 {
		a = append(a, usernsMap(p.usernsFirst)...)
	}
	if !podman && p.rt.OCIRuntime != "" {
		a = append(a, "--runtime", p.rt.OCIRuntime)
	}
	if p.terms.Network != engine.NetworkUnrestricted {
		a = append(a, "--network=none")
	}
	ws := "rw,nosuid,nodev,size=" + strconv.FormatInt(p.workspaceBytes, 10) + ",mode=0700"
	if podman {
		// podman mounts no writable tmpfs of its own on a read-only root, and "U" gives the
		// workspace to the container's user.
		a = append(a, "--read-only-tmpfs=false", "--unsetenv-all", "--http-proxy=false")
		ws += ",U"
	} else {
		ws += ",uid=" + strconv.Itoa(p.uid) + ",gid=" + strconv.Itoa(p.gid)
	}
	a = append(a, "--tmpfs", p.workspace+":"+ws,
		"--tmpfs", "/tmp:rw,nosuid,nodev,size="+strconv.FormatInt(p.tmpBytes, 10)+",mode=1777")
	if p.execDir != "" {
		// z: where SELinux is enforcing, the container may use the directory (a no-op elsewhere).
		a = append(a, "--volume", p.execDir+":"+channelDir+":ro,z")
	}
	a = append(a, "--workdir", p.workspace)

	t := p.terms
	ulimit := func(name string, v uint64) {
		s := strconv.FormatUint(v, 10)
		a = append(a, "--ulimit", name+"="+s+":"+s)
	}
	// cpu: SIGXCPU at the limit (the bootstrap flushes and ends the program), SIGKILL
	// engine.CPUGraceSeconds later for a program that ignores it.
	a = append(a, "--ulimit", "cpu="+strconv.FormatUint(engine.CPURlimit(t.CPUSeconds), 10)+":"+
		strconv.FormatUint(engine.CPUHardRlimit(t.CPUSeconds), 10))
	// Neither runtime knows RLIMIT_AS; RLIMIT_DATA bounds what malloc maps, so an allocation
	// over the limit is a MemoryError rather than an OOM kill (the cgroup binds either way).
	// The OCI runtime's own init runs under it before the interpreter does, and needs some
	// 70 MiB (runc): below minDataLimit the cgroup alone ends what is too large.
	ulimit("data", uint64(max(t.MemoryBytes, minDataLimit)))
	ulimit("fsize", uint64(t.FileSizeBytes))
	ulimit("nofile", 1024)
	if p.nproc > 0 {
		ulimit("nproc", p.nproc)
	}
	ulimit("core", 0)
	a = append(a, "--pids-limit", strconv.Itoa(t.ProcessCount))
	if p.cgroupParent != "" {
		a = append(a, "--cgroup-parent", p.cgroupParent)
	} else {
		m := strconv.FormatInt(t.MemoryBytes, 10)
		a = append(a, "--memory", m, "--memory-swap", m)
	}
	envFlags, keep := p.env()
	a = append(a, envFlags...)
	a = append(a, "--entrypoint", p.python, p.image)
	a = append(a, p.interpreter...)
	channelArg := streamsPathArg // no socket directory: the channel is the standard streams
	if p.execDir != "" {
		channelArg = channelDir + "/" + channelSocket
	}
	return append(a, channelArg, strings.Join(keep, ","))
}

// profileName is the file name of the policy's profile for network none or not.
func profileName(networkNone bool) string {
	if networkNone {
		return "seccomp-network-none.json"
	}
	return "seccomp.json"
}

// writeProfile writes the policy's profile (seccomp.OCIProfile) for the engine's architecture
// into dir and returns its path and content.
func writeProfile(dir string, networkNone bool, machine string) (string, []byte, error) {
	b, err := seccomp.OCIProfile(networkNone, machine)
	if err != nil {
		return "", nil, err
	}
	path := filepath.Join(dir, profileName(networkNone))
	return path, b, os.WriteFile(path, b, 0o600)
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}
