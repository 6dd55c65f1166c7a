//go:build linux

package container

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/spawned"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/cgroup"
	"github.com/mcp-sandbox/mcp-sandbox/internal/identity"
	"github.com/mcp-sandbox/mcp-sandbox/internal/tokenconn"
	"golang.org/x/sys/unix"
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

// monitorGroup is where podman (cgroupfs) puts its monitor under the cgroup parent it is given.
const monitorGroup = "conmon"

// HybridCgroups reports whether this host's cgroup layout is hybrid in the way crun refuses.
func HybridCgroups() bool { return cgroup.DetectLayout(cgroup.Root).Hybrid }

// Backend is the container backend. Close releases it.
type Backend struct {
	opts   Options
	rt     *Runtime
	ids    *identity.Pool
	id     string // the owner id: every container's OwnerLabel
	dir    string // the owner's directory: the executions' socket directories
	cgroup bool   // executions get a cgroup of their own
	layout cgroup.Layout
	// seccomp are the policy's profiles, files in dir: [0] for terms that grant network, [1]
	// for network none.
	seccomp [2]string
	// userns: each execution gets a user namespace of its own (podman as root).
	userns bool
	// streams: the channel is the container's standard streams, not the token socket
	// (streams_linux.go): the runtime's containers run where a host socket does not reach.
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
	b = &Backend{opts: opts, rt: rt, ids: ids, id: id, dir: dir, layout: cgroup.DetectLayout(cgroup.Root), pause: pause}
	b.cgroup = rt.CgroupParent && !slices.Contains(opts.Disable, "cgroup")
	b.userns = rt.Kind == "podman" && !rt.Rootless && !slices.Contains(opts.Disable, "userns")
	b.streams = rt.Remote || slices.Contains(opts.Disable, "socket")
	for i, networkNone := range []bool{false, true} {
		if b.seccomp[i], err = writeProfile(dir, networkNone); err != nil {
			os.RemoveAll(dir)
			return nil, failure.Wrap(failure.BackendUnavailable, err, "writing the seccomp profile failed: %v", err)
		}
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
	if os.Geteuid() == 0 {
		m = append(m, "identity-drop")
	}
	if b.cgroup {
		v := "v1"
		if b.layout.V2 {
			v = "v2"
		}
		m = append(m, "execution-cgroup-"+v)
	} else {
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
	c := &child{b: b, name: "mcp-sandbox-" + b.id + "-" + tag, workspace: "/workspace-" + tag, release: release,
		cpuLimit: engine.CPURlimit(spec.Terms.CPUSeconds),
		facts: engine.Facts{MountBoundary: true, PIDNamespace: true, NetNamespace: true,
			Seccomp: spec.Terms.Network != engine.NetworkUnrestricted, Cgroup: !b.rt.Rootless, HostUID: os.Geteuid(), RunAsUID: id.UID, ExclusiveUID: id.Exclusive}}
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
		interpreter: spec.Argv, nproc: nprocLimit(spec.Terms.ProcessCount)}
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
		if c.cg, err = cgroup.NewParent(cgroup.Base, cgroupName(b.id, tag), monitorGroup, spec.Terms.MemoryBytes); err != nil {
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

// nprocLimit is RLIMIT_NPROC for the container. The pids limit bounds the execution; the
// kernel counts RLIMIT_NPROC per uid across the host, where other executions may share the
// uid, so it is set as high as it can usefully go: no more than the kernel's pid_max (a
// ceiling podman also puts on its monitor's hard limit, which the container inherits and
// cannot exceed), nor this process's own hard limit, nor what the grade accepts.
func nprocLimit(processCount int) uint64 {
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

// Detection is what Detect found, for doctor's list of backends.
type Detection struct {
	Available bool
	Reason    string // why not, with the command that fixes it
	Runtime   *Runtime
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
	rt, err := FindRuntime(ctx, &opts)
	if err != nil {
		var fe *failure.Error
		if errors.As(err, &fe) {
			return Detection{Reason: fe.Message}
		}
		return Detection{Reason: err.Error()}
	}
	present, err := imagePresent(ctx, rt, opts.Image)
	switch {
	case err != nil:
		return Detection{Runtime: rt, Reason: fmt.Sprintf("cannot tell whether the image %s is present: %v", opts.Image, err)}
	case !present:
		return Detection{Runtime: rt, Reason: ImageGuidance(rt, opts.Image)}
	}
	return Detection{Available: true, Runtime: rt}
}
