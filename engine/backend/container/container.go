package container

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/spawned"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/identity"
	"github.com/mcp-sandbox/mcp-sandbox/internal/tokenconn"
)

const (
	// DefaultImageName is what `mcp-sandbox image build` builds; DefaultImage its tag a profile
	// uses unless it names another.
	DefaultImageName = "localhost/mcp-sandbox-python"
	DefaultImage     = DefaultImageName + ":latest"
	// DefaultPython is the interpreter's path inside the image.
	DefaultPython = "/usr/bin/python3"
)

// Options configure the container backend. cmd/ resolves them from the profile.
type Options struct {
	// Runtime is "podman", "docker" or a path to one of them; "" takes the first that answers.
	Runtime string
	// Image is a name or a digest (name@sha256:…); DefaultImage when empty. Never pulled.
	Image string
	// Python is the interpreter inside the image; DefaultPython when empty.
	Python string
	// OCIRuntime is passed to the runtime as --runtime (runc, runsc, …); "" is its default.
	OCIRuntime string
	// RunAs is "uid:gid" or a range "FIRST-LAST"; default 65534:65534.
	RunAs string
	// Env holds the env_allowlist variables with their values.
	Env map[string]string
	spawned.Tmpfs
	// StateDir holds the owners' directories (the sockets); default os.TempDir().
	StateDir string
	// Disable makes mechanisms count as absent: "container" (no runtime), "cgroup" (no
	// execution cgroup: the runtime's flags carry the limits), "userns" (no user namespace of
	// the execution's own), "socket" (no socket reaches the container: the channel is its
	// standard streams, as for a runtime whose containers run in a VM).
	Disable []string
}

// Backend is the container backend. Close releases it.
type Backend struct {
	opts   Options
	rt     *Runtime
	ids    *identity.Pool
	id     string // the owner id: every container's OwnerLabel
	dir    string // the owner's directory: the executions' socket directories
	cgroup bool   // executions get a cgroup of their own
	// cgroupVersion is this host's layout ("v1", "v2"), for Mechanisms.
	cgroupVersion string
	// seccomp are the policy's profiles, files in dir: [0] for terms that grant network, [1]
	// for network none.
	seccomp [2]string
	// userns: each execution gets a user namespace of its own (podman as root).
	userns bool
	// streams: the channel is the container's standard streams, not the token socket
	// (streams.go): the runtime's containers run where a host socket does not reach.
	streams bool

	executions sync.WaitGroup // started children not yet closed
	closeOnce  sync.Once
	pause      *PauseWatch // podman's pause process, when New started it without root
}

// New finds the runtime, checks that the image is present (it is never pulled), sweeps what
// dead owners left, and makes its owner directory. It starts no container. Its failures
// are backend_unavailable and say what to install or run.
func New(ctx context.Context, options *Options) (b *Backend, err error) {
	// Without root, podman's first command starts its pause process: a backend that fails
	// here, or once closed, leaves none it started.
	pause := WatchPause()
	defer func() {
		if err != nil {
			pause.End()
		}
	}()
	var opts Options
	if options != nil {
		opts = *options
	}
	if opts.Image == "" {
		opts.Image = DefaultImage
	}
	if opts.Python == "" {
		opts.Python = DefaultPython
	}
	if opts.RunAs == "" {
		opts.RunAs = "65534:65534"
	}
	opts.Tmpfs = opts.Tmpfs.Sized()
	if opts.StateDir == "" {
		opts.StateDir = os.TempDir()
	}
	ids, err := identity.Parse(opts.RunAs)
	if err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "%v", err)
	}
	rt, err := FindRuntime(ctx, &opts)
	if err != nil {
		return nil, err
	}
	present, err := imagePresent(ctx, rt, opts.Image)
	if err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "cannot tell whether the image %s is present: %v", opts.Image, err)
	}
	if !present {
		return nil, failure.New(failure.BackendUnavailable, "%s", ImageGuidance(rt, opts.Image))
	}
	sweep(ctx, rt, opts.StateDir)
	id, dir, err := newOwner(opts.StateDir)
	if err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "creating the container backend's directory under %s failed: %v", opts.StateDir, err)
	}
	b = &Backend{opts: opts, rt: rt, ids: ids, id: id, dir: dir, pause: pause}
	b.cgroupVersion, _, _ = hostCgroups()
	b.cgroup = rt.CgroupParent && !slices.Contains(opts.Disable, "cgroup")
	b.userns = rt.Kind == "podman" && !rt.Rootless && usernsLeases && !slices.Contains(opts.Disable, "userns")
	b.streams = rt.Remote || slices.Contains(opts.Disable, "socket")
	if b.seccomp, err = placeProfiles(ctx, rt, opts, dir); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return b, nil
}

// Close waits for the children still open to be closed, then removes the owner's directory
// and ends podman's pause process if this backend started it (PauseWatch). It is idempotent.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		b.executions.Wait()
		os.RemoveAll(b.dir)
		b.pause.End()
	})
	return nil
}

// Name is "container".
func (b *Backend) Name() string { return "container" }

// Runtime is the runtime the backend drives.
func (b *Backend) Runtime() *Runtime { return b.rt }

// Image is the image every execution runs.
func (b *Backend) Image() string { return b.opts.Image }

// Owner is the id every container of this backend carries as its OwnerLabel.
func (b *Backend) Owner() string { return b.id }

// Mechanisms lists what this backend applies here.
func (b *Backend) Mechanisms() []string {
	m := []string{b.rt.Kind + " " + b.rt.Version, "image " + b.opts.Image, "pull-never"}
	if b.rt.OCIRuntime != "" {
		oci := "oci-runtime " + b.rt.OCIRuntime
		if b.rt.OCINote != "" {
			oci += " (" + b.rt.OCINote + ")"
		}
		m = append(m, oci)
	}
	m = append(m, "pid-namespace", "mount-namespace", "net-namespace", "ipc-namespace", "uts-namespace",
		"read-only-root", "tmpfs-workspace", "cap-drop-all", "no_new_privs", "seccomp-policy (profile "+profileName(false)+
			" or, for network none, "+profileName(true)+")", "rlimits", "pids-limit", "scrubbed-env")
	if b.streams {
		m = append(m, "token-streams (the channel over the container's stdin and stdout)")
	} else {
		m = append(m, "token-socket")
	}
	if b.userns {
		m = append(m, "user-namespace per execution (run_as ids below 65536)")
	}
	if os.Geteuid() == 0 || b.rt.Remote {
		m = append(m, "identity-drop") // the run_as identity; in a VM it is never this host's
	}
	switch {
	case b.cgroup:
		m = append(m, "execution-cgroup-"+b.cgroupVersion)
	case b.rt.Remote:
		m = append(m, "engine-cgroup (memory and pids limits graded from what the container's probe sees of its cgroup)",
			"engine-oom-report (an OOM kill read from the engine's inspect)", "workspace-through-exec (artifacts read by an exec in the container)")
	default:
		m = append(m, "runtime-memory-limit")
	}
	return m
}

// Start runs one container; it returns once the runtime's CLI is running. The child connects
// to the channel by itself.
func (b *Backend) Start(ctx context.Context, spec engine.LaunchSpec) (engine.Child, error) {
	id, release, err := b.ids.Lease(ctx, spec.Ahead)
	if err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "%v", err)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tag := hex.EncodeToString(rnd[:])
	c := &child{b: b, name: "mcp-sandbox-" + b.id + "-" + tag, workspace: "/workspace-" + tag, release: release, uid: id.UID, gid: id.GID,
		cpuLimit: engine.CPURlimit(spec.Terms.CPUSeconds),
		facts: engine.Facts{MountBoundary: true, PIDNamespace: true, NetNamespace: true,
			Seccomp: spec.Terms.Network != engine.NetworkUnrestricted, Cgroup: !b.rt.Rootless && !b.rt.Remote, EngineCgroup: b.rt.Remote,
			HostUID: hostUID(b.rt), RunAsUID: id.UID, ExclusiveUID: id.Exclusive}}
	b.executions.Add(1)
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	token := tokenconn.NewToken()
	var st *streams
	if b.streams {
		st = newStreams(token, spec.Stdout)
		c.ch = st
	} else {
		c.execDir = filepath.Join(b.dir, tag)
		if err := os.Mkdir(c.execDir, 0o755); err != nil {
			return nil, failure.Wrap(failure.BackendUnavailable, err, "creating the execution's socket directory failed: %v", err)
		}
		sock, err := listen(filepath.Join(c.execDir, channelSocket), token, c.settleExit)
		if err != nil {
			return nil, failure.Wrap(failure.BackendUnavailable, err, "listening on the execution's socket failed: %v", err)
		}
		c.ch = sock
	}
	p := &plan{rt: b.rt, name: c.name, owner: b.id, image: b.opts.Image, python: b.opts.Python,
		uid: id.UID, gid: id.GID, terms: spec.Terms, workspace: c.workspace, execDir: c.execDir,
		seccomp:        b.seccomp[boolIndex(spec.Terms.Network != engine.NetworkUnrestricted)],
		workspaceBytes: b.opts.WorkspaceBytes, tmpBytes: b.opts.TmpBytes, allowed: b.opts.Env,
		interpreter: spec.Argv, nproc: nprocLimit(b.rt, spec.Terms.ProcessCount), remote: b.rt.Remote}
	if b.userns && id.UID < usernsBlock && id.GID < usernsBlock {
		block, err := leaseIDBlock()
		if err != nil {
			return nil, failure.Wrap(failure.BackendUnavailable, err, "a user namespace for the execution: %v", err)
		}
		c.release = func() { block.Release(); release() }
		p.usernsFirst = block.First
		c.facts.UserNamespace = true
	}
	if b.cgroup {
		if c.cg, err = newExecCgroup(b.id, tag, spec.Terms.MemoryBytes); err != nil {
			return nil, failure.Wrap(failure.BackendUnavailable, err, "creating the execution's cgroup failed: %v", err)
		}
		p.cgroupParent = c.cg.Path()
		if st != nil {
			// The interpreter is the container's one process when its token arrives, before
			// any program byte: its pid lets the host see its exit and its workspace.
			cg := c.cg
			st.findPeer = func() int {
				if pids := cg.PIDs(); len(pids) == 1 {
					return pids[0]
				}
				return 0
			}
		}
	}
	env := os.Environ()
	for k, v := range b.opts.Env {
		env = append(env, k+"="+v)
	}
	if err := c.start(p.args(), env, token, spec.Stdout, spec.Stderr); err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "%v", err)
	}
	ok = true
	return c, nil
}

// nprocLimit is RLIMIT_NPROC for the container, or 0 to leave the engine's own. An engine on
// this host gets what this host allows (hostNprocLimit). An engine elsewhere has a pid_max
// and hard limits this host cannot read, and refuses a limit above them: as root there (which
// would otherwise give 4194304) it gets at most the kernel's default pid_max, which no count
// of tasks passes where it holds; rootless, its own default, which its user's limits bound.
// Its pids limit, the cgroup's, bounds the execution either way.
func nprocLimit(rt *Runtime, processCount int) uint64 {
	switch {
	case !rt.Remote:
		return hostNprocLimit(processCount)
	case rt.Rootless:
		return 0
	}
	return min(uint64(processCount)+1<<16, defaultPIDMax)
}

// defaultPIDMax is the kernel's default pid_max.
const defaultPIDMax = 32768

// hostUID is the uid the engine's containers could share with the host: this process's for
// an engine on this host; none (-1) for one in a VM or on another machine, whose uids are not
// this host's.
func hostUID(rt *Runtime) int {
	if rt.Remote {
		return -1
	}
	return os.Geteuid()
}

// Detection is what Detect found, for doctor's list of backends.
type Detection struct {
	Available bool
	Reason    string // why not, with the command that fixes it
	Runtime   *Runtime
	// Machine says whether a Podman machine's VM runs (podman's own list of them), where
	// podman runs its containers in one (macOS, Windows); "" elsewhere.
	Machine string
}

// Detect reports whether the backend could run here with opts: a runtime that answers and
// the image present. It starts nothing and creates nothing, and leaves no process behind (not
// even rootless podman's pause process, unless another podman process of the user uses it).
func Detect(ctx context.Context, options *Options) Detection {
	defer WatchPause().End() // a probe leaves no pause process behind
	var opts Options
	if options != nil {
		opts = *options
	}
	if opts.Image == "" {
		opts.Image = DefaultImage
	}
	machine := podmanMachines(ctx, opts.Runtime)
	rt, err := FindRuntime(ctx, &opts)
	if err != nil {
		var fe *failure.Error
		if errors.As(err, &fe) {
			return Detection{Reason: fe.Message, Machine: machine}
		}
		return Detection{Reason: err.Error(), Machine: machine}
	}
	present, err := imagePresent(ctx, rt, opts.Image)
	switch {
	case err != nil:
		return Detection{Runtime: rt, Machine: machine, Reason: fmt.Sprintf("cannot tell whether the image %s is present: %v", opts.Image, err)}
	case !present:
		return Detection{Runtime: rt, Machine: machine, Reason: ImageGuidance(rt, opts.Image)}
	}
	return Detection{Available: true, Runtime: rt, Machine: machine}
}

// podmanMachines is podman's own list of its machines and whether each runs, where podman
// runs containers in one (off Linux) and named is podman or unset: "" where there is none to
// list. It needs no machine running.
func podmanMachines(ctx context.Context, named string) string {
	if runtime.GOOS == "linux" || named != "" && !strings.HasPrefix(filepath.Base(named), "podman") {
		return ""
	}
	path, err := exec.LookPath("podman")
	if err != nil {
		return ""
	}
	out, err := cli(ctx, path, "machine", "list", "--noheading", "--format", "{{.Name}}|{{.Running}}")
	if err != nil {
		return "podman cannot list its machines: " + err.Error()
	}
	var m []string
	for _, line := range strings.Split(out, "\n") {
		f := fields(strings.TrimSpace(line), 2)
		if f[0] == "" {
			continue
		}
		state := "stopped (podman machine start " + strings.TrimSuffix(f[0], "*") + ")"
		if f[1] == "true" {
			state = "running"
		}
		m = append(m, "machine "+f[0]+" "+state)
	}
	if len(m) == 0 {
		return "no Podman machine (podman machine init, then podman machine start)"
	}
	return strings.Join(m, "; ")
}
