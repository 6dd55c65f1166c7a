//go:build linux

package bwrap

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/spawned"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/launch"
	"github.com/mcp-sandbox/mcp-sandbox/internal/owner"
	"github.com/mcp-sandbox/mcp-sandbox/internal/spawn"
)

// Backend is the bwrap backend.
type Backend struct {
	opts  Options
	bwrap string
	env   string
	base  *spawned.Base
}

// Find returns the bwrap binary, or why there is none.
func Find(options *Options) (string, string) {
	var opts Options
	if options != nil {
		opts = *options
	}
	if opts.Disabled("bwrap") {
		return "", "bwrap not found (disabled): apt-get install bubblewrap"
	}
	if opts.Bwrap != "" {
		if _, err := os.Stat(opts.Bwrap); err != nil {
			return "", "bwrap not found at " + opts.Bwrap + ": apt-get install bubblewrap"
		}
		return opts.Bwrap, ""
	}
	p, err := exec.LookPath("bwrap")
	if err != nil {
		return "", "bwrap not found: apt-get install bubblewrap"
	}
	if os.Geteuid() != 0 {
		// Without root bwrap makes a user namespace; AppArmor's restriction is left to the
		// profile a distribution may give bwrap itself, and to Describe.
		if opts.Disabled("userns") {
			return "", "bwrap needs user namespaces without root, and user namespace creation is disabled"
		}
		if why := opts.Host.KernelBlocked(); why != "" {
			return "", "bwrap needs user namespaces without root: " + why
		}
	}
	return p, ""
}

// New prepares the backend. It fails with backend_unavailable when bwrap is not installed.
func New(ctx context.Context, options *Options) (*Backend, error) {
	var opts Options
	if options != nil {
		opts = *options
	}
	opts.Tmpfs = opts.Tmpfs.Sized()
	b := &Backend{opts: opts}
	var (
		reason string
		err    error
	)
	if b.bwrap, reason = Find(&opts); reason != "" {
		return nil, failure.New(failure.BackendUnavailable, "%s", reason)
	}
	if b.env, err = exec.LookPath("env"); err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "env(1) not found")
	}
	base, err := spawned.Resolve(ctx, &opts.Options, nil)
	if err != nil {
		return nil, err
	}
	b.base = base
	return b, nil
}

// EgressByRules: as root, the init helper can be started in a network namespace whose one
// route out is the egress proxy's listener, which bwrap then keeps.
func (b *Backend) EgressByRules() bool { return os.Geteuid() == 0 }

// RunsCommands: a command (an upstream stdio server) runs in the same namespaces, root and
// limits as a program, bwrap passing the channel on as its stdin and stdout.
func (b *Backend) RunsCommands() bool { return true }

// Name is "bwrap".
func (b *Backend) Name() string { return "bwrap" }

// Python is the interpreter the backend runs.
func (b *Backend) Python() string { return b.base.Python }

// Mechanisms lists what this backend applies here.
func (b *Backend) Mechanisms() []string {
	m := []string{"bwrap", "user-namespace", "mount-namespace", "pid-namespace", "net-namespace", "ipc-namespace",
		"uts-namespace", "rlimits", "no_new_privs", "scrubbed-env", "tmpfs-workspace"}
	if b.base.Drop {
		m = append(m, "identity-drop")
	}
	if b.base.Cgroups != nil {
		m = append(m, "cgroup-"+b.base.Cgroups.Version())
	}
	if !b.opts.Disabled("seccomp") {
		m = append(m, "seccomp-policy", "seccomp-deny-inet")
	}
	return m
}

// args are bwrap's arguments for one execution, up to and including "--".
func (b *Backend) args(workspace string, netns bool, binds ...string) []string {
	a := []string{"--die-with-parent", "--as-pid-1", "--new-session", "--unshare-user", "--unshare-pid", "--unshare-ipc",
		"--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox"}
	if netns {
		a = append(a, "--unshare-net")
	}
	// /tmp first: a read-only path under it (a virtual environment made in /tmp) is bound on
	// top of the fresh tmpfs rather than hidden under it.
	a = append(a, "--size", strconv.FormatInt(b.opts.TmpBytes, 10), "--perms", "1777", "--tmpfs", "/tmp")
	paths := slices.Concat(spawned.SystemPaths, b.base.RODirs)
	sort.Strings(paths)
	var done []string
	for _, p := range paths {
		if slices.ContainsFunc(done, func(d string) bool { return p == d || len(p) > len(d) && p[:len(d)+1] == d+"/" }) {
			continue
		}
		st, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if st.Mode()&os.ModeSymlink != 0 {
			if target, err := os.Readlink(p); err == nil {
				a = append(a, "--symlink", target, p)
			}
		} else {
			a = append(a, "--ro-bind", p, p)
		}
		done = append(done, p)
	}
	a = append(a, binds...)
	a = append(a, "--proc", "/proc", "--dev", "/dev",
		"--size", strconv.FormatInt(b.opts.WorkspaceBytes, 10), "--perms", "0700", "--tmpfs", workspace,
		"--remount-ro", "/", "--chdir", workspace, "--")
	return a
}

// Start launches one child.
func (b *Backend) Start(ctx context.Context, spec engine.LaunchSpec) (engine.Child, error) {
	netns := spec.Terms.Network == engine.NetworkNone
	// Under network rules the init helper is started in a network namespace of its own (root
	// only), sends the host a listener on its loopback before it execs bwrap, and bwrap keeps
	// that namespace (no --unshare-net): the egress proxy is the program's one route out.
	rules := spec.Egress != nil
	if rules && !b.EgressByRules() {
		return nil, failure.New(failure.NetworkUnavailable, "the bwrap backend confines network by rules only when the server runs as root")
	}
	seccomp := !b.opts.Disabled("seccomp")
	// bwrap always runs unprivileged (as the sandbox identity, or the host's own uid without
	// root), so it always makes a user namespace of its own.
	c := &spawned.Child{Proc: &spawn.Proc{Unkillable: b.base.SignalRefused}, SignalFromStatus: true, Containment: engine.Facts{MountBoundary: true,
		PIDNamespace: true, NetNamespace: netns || rules, UserNamespace: true, InterpreterIsInit: true, Unkillable: b.base.SignalRefused,
		Seccomp: seccomp && (netns || rules)}}
	c.Egress, c.EgressPort = rules, engine.EgressPort
	id, err := b.base.Lease(ctx, c, spec.Ahead)
	if err != nil {
		return nil, err
	}
	ok := false
	defer c.CloseUnless(&ok)
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tag := hex.EncodeToString(rnd[:])
	workspace := "/workspace-" + tag
	c.WorkspacePath = func() string {
		if root := interpreterRoot(c.Pid()); root != "" {
			return root + workspace
		}
		return ""
	}
	env := spawn.Env(workspace, b.opts.Env)
	var binds []string
	var attr *syscall.SysProcAttr
	if rules {
		dir, err := os.MkdirTemp("", "mcp-sandbox-egress-")
		if err != nil {
			return nil, failure.Wrap(failure.BackendUnavailable, err, "a directory for the execution's CA")
		}
		c.Cleanup = append(c.Cleanup, func() { _ = os.RemoveAll(dir) })
		// bwrap runs as the sandbox identity, which must read the certificate to bind it.
		ca := filepath.Join(dir, "ca.pem")
		if err := os.Chmod(dir, 0o755); err != nil {
			return nil, failure.Wrap(failure.BackendUnavailable, err, "a directory for the execution's CA")
		}
		if err := os.WriteFile(ca, spec.Egress.CAPEM, 0o644); err != nil {
			return nil, failure.Wrap(failure.BackendUnavailable, err, "writing the execution's CA")
		}
		binds = []string{"--ro-bind", ca, engine.EgressCAPath}
		for k, v := range engine.EgressEnv() {
			env = append(env, k+"="+v)
		}
		attr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	}
	// A command's declared paths, bound after the system's (bwrap binds nosuid and nodev, and
	// fails on a path missing or out of the sandbox identity's reach).
	for _, p := range spec.Paths {
		if p.Writable {
			binds = append(binds, "--bind", p.Path, p.Path)
		} else {
			binds = append(binds, "--ro-bind", p.Path, p.Path)
		}
	}
	argv := append([]string{b.bwrap}, b.args(workspace, netns, binds...)...)
	// bwrap always sets PWD after --chdir; env(1) takes it out again, so the environment
	// stays built from nothing.
	argv = append(argv, b.env, "-u", "PWD")
	if len(spec.Command) > 0 {
		argv = append(argv, spec.Command...)
		for _, k := range slices.Sorted(maps.Keys(spec.CommandEnv)) {
			env = append(env, k+"="+spec.CommandEnv[k])
		}
	} else {
		argv = append(append(argv, b.base.Python), b.base.Argv(spec.Argv)...)
	}
	ls := &launch.Spec{
		Python: b.bwrap, Argv: argv, Env: env, StdioChannel: len(spec.Command) > 0,
		ParentPID: os.Getpid(), Drop: b.base.Drop, UID: id.UID, GID: id.GID,
		Rlimits: launch.Rlimits{CPUSeconds: engine.CPURlimit(spec.Terms.CPUSeconds), CPUHard: engine.CPUHardRlimit(spec.Terms.CPUSeconds), AS: uint64(spec.Terms.MemoryBytes),
			FSize: uint64(spec.Terms.FileSizeBytes), NoFile: 1024},
		// Handed on to bwrap, which loads it once it has made its namespaces (the policy
		// refuses new user namespaces and mounts), just before it execs the interpreter.
		Seccomp: seccomp, SeccompHandOff: true, DenyInet: seccomp && netns,
	}
	if b.base.Drop {
		ls.Rlimits.NProc = uint64(spec.Terms.ProcessCount) + 2 // bwrap itself and its init
	}
	if err := c.JoinCgroup(b.base.Cgroups, owner.Name("bwrap"), spec.Terms, 3, ls); err != nil {
		return nil, err
	}
	if err := c.Start(b.base.InitPath, ls, attr, spec.Stdout, spec.Stderr); err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "%v", err)
	}
	if rules {
		if err := c.ReceiveEgress(ctx); err != nil {
			return nil, failure.Wrap(failure.BackendUnavailable, err, "%v", err)
		}
	}
	ok = true
	return c, nil
}

// interpreterRoot is the root of bwrap's child (the interpreter, pid 1 of the sandbox), found
// as the only child of the outer bwrap at pid; "" when there is not exactly one.
func interpreterRoot(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return ""
	}
	pids := strings.Fields(string(b))
	if len(pids) != 1 {
		return ""
	}
	return "/proc/" + pids[0] + "/root"
}
