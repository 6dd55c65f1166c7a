//go:build linux

package namespaces

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/spawned"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/identity"
	"github.com/mcp-sandbox/mcp-sandbox/internal/launch"
	"github.com/mcp-sandbox/mcp-sandbox/internal/owner"
	"github.com/mcp-sandbox/mcp-sandbox/internal/spawn"
	"github.com/mcp-sandbox/mcp-sandbox/internal/userns"
)

// Backend is the namespaces backend.
type Backend struct {
	opts Options
	base *spawned.Base
	root bool // the host is root: no user namespace needed
	// sub, without root, is the user's subordinate uid and gid the program runs as (mapped
	// from the run_as identity inside); nil when there are none, and subWhy says why.
	sub    *userns.SubIDs
	subWhy string
	tpl    templates
	// tplSub, on a root host with templates on, is the host uid and gid a template's uid 0
	// maps to: the last of root's subordinate ranges, so the template holds no host identity
	// of any worth; nil when root has none, and tplSubWhy says why.
	tplSub    *userns.SubIDs
	tplSubWhy string
	// tplIDs, without root and with templates on, leases each forked child a uid and gid of
	// its own from tplUIDs and tplGIDs: a block of the user's subordinate ranges (inside,
	// the uids keep their host numbers, and the gids take the same numbers), mapped into every
	// template's user namespace beside the user's own uid at 0 (templateIDs). Nil when there
	// is no block to take, and tplIDsWhy says why.
	tplIDs           *identity.Pool
	tplUIDs, tplGIDs userns.Range
	tplIDsWhy        string
}

// New prepares the backend: it checks the namespaces can be made, resolves the interpreter
// and its directories, and detects a cgroup. It starts no child.
func New(ctx context.Context, options *Options) (*Backend, error) {
	var opts Options
	if options != nil {
		opts = *options
	}
	opts.Tmpfs = opts.Tmpfs.Sized()
	if opts.RootBase == "" {
		opts.RootBase = os.TempDir()
	}
	b := &Backend{opts: opts, root: os.Geteuid() == 0}
	if reason := b.unavailable(); reason != "" {
		return nil, failure.New(failure.BackendUnavailable, "the namespaces backend is unavailable: %s", reason)
	}
	// Root mount points a killed server left (empty on the host: the mounts lived in the
	// child's mount namespace), only those whose owner is provably dead (internal/owner).
	// The sweep lists the whole temporary directory, and nothing below needs it done, so it
	// runs beside the interpreter's resolution; New returns once both are done
	// (docs/design.md §19.10).
	swept := make(chan struct{})
	go func() {
		defer close(swept)
		if n := owner.Sweep(opts.RootBase, rootPrefix, os.Remove); n > 0 {
			slog.Info("swept root mount points a stopped server left", "count", n, "dir", opts.RootBase)
		}
	}()
	defer func() { <-swept }()
	if !b.root {
		b.sub, b.subWhy = b.subordinate()
	} else if opts.Template {
		b.tplSub, b.tplSubWhy = b.opts.Host.Subordinate("root", 0)
	}
	if b.sub != nil {
		base, err := spawned.Resolve(ctx, &opts.Options, &[2]int{b.sub.UID, b.sub.GID})
		if err == nil {
			err = b.trial(ctx, base.InitPath, base.IDs)
		}
		if err == nil {
			b.base = base
			if opts.Template {
				b.templateIDs()
			}
			b.keepGroups()
			return b, nil
		}
		b.sub, b.subWhy = nil, fmt.Sprintf("the subordinate uid %d cannot be used (%v)", b.sub.UID, err)
	}
	base, err := spawned.Resolve(ctx, &opts.Options, nil)
	if err != nil {
		return nil, err
	}
	b.base = base
	b.keepGroups()
	return b, nil
}

// keptGroups is how many emptied execution cgroups a Backend keeps for its next children
// (cgroup.Manager.Keep): about the children of a warm pool and its refills at once.
const keptGroups = 16

// keepGroups has the Backend's cgroup manager keep emptied groups for the next children;
// Close removes them.
func (b *Backend) keepGroups() {
	if b.base.Cgroups != nil {
		b.base.Cgroups.Keep(keptGroups)
	}
}

// etcFiles is the minimal /etc of a child's root, for run_as uid:gid with home.
func etcFiles(uid, gid int, home string) map[string]string {
	return map[string]string{
		"/etc/passwd":   fmt.Sprintf("root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:%d:%d:sandbox:%s:/usr/sbin/nologin\n", uid, gid, home),
		"/etc/group":    fmt.Sprintf("root:x:0:\nsandbox:x:%d:\n", gid),
		"/etc/hosts":    "127.0.0.1\tlocalhost\n::1\tlocalhost\n",
		"/etc/hostname": "sandbox\n",
	}
}

// rootMountPoint makes, with mode, a new root mount point in RootBase (its name carries this
// server's owner tag) and a random tag for the names inside the root.
func (b *Backend) rootMountPoint(mode os.FileMode) (tag, root string, err error) {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	root = filepath.Join(b.opts.RootBase, owner.Name(rootPrefix))
	if err := os.Mkdir(root, mode); err != nil {
		return "", "", failure.Wrap(failure.BackendUnavailable, err, "creating the root mount point failed")
	}
	return hex.EncodeToString(rnd[:]), root, nil
}

// rootPrefix starts the name of every root mount point, which carries its server's owner tag.
const rootPrefix = "mcp-sandbox-root"

// subordinate finds the user's subordinate ids, or says why there are none to use.
func (b *Backend) subordinate() (*userns.SubIDs, string) {
	if b.disabled("subids") {
		return nil, "subordinate ids are disabled (" + "MCP_SANDBOX_DISABLE=subids)"
	}
	name := ""
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	return b.opts.Host.Subordinate(name, os.Geteuid())
}

// trial starts the init helper once in a user namespace mapped to the subordinate ids, as
// Start will, and sees it come up: a broken range or newuidmap shows here, not on every
// execution.
func (b *Backend) trial(ctx context.Context, initPath string, ids *identity.Pool) error {
	id, release, err := ids.Lease(ctx, false)
	if err != nil {
		return err
	}
	release()
	if id.UID == 0 || id.GID == 0 {
		return fmt.Errorf("run_as %d:%d: inside the namespace 0 is the host's own uid", id.UID, id.GID)
	}
	p := &spawn.Proc{MapIDs: b.mapper(ctx, id)}
	defer p.Close()
	err = p.Start(initPath, &launch.Spec{Trial: true}, &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}, io.Discard, io.Discard)
	if err != nil {
		return err
	}
	if exit := p.Wait(); exit.Code != 0 {
		return fmt.Errorf("the init helper exited with status %d %s in its user namespace", exit.Code, exit.Signal)
	}
	return nil
}

// mapper maps inside 0 to the host's own ids and the run_as identity id to the subordinate
// ones, for a helper started in a fresh user namespace.
func (b *Backend) mapper(ctx context.Context, id identity.Identity) func(int) error {
	return func(pid int) error {
		return b.sub.Map(ctx, pid, os.Geteuid(), os.Getegid(), id.UID, id.GID)
	}
}

// Available reports whether this host can make the namespaces, and why not.
func Available(options *Options) (bool, string) {
	var opts Options
	if options != nil {
		opts = *options
	}
	b := &Backend{opts: opts, root: os.Geteuid() == 0}
	r := b.unavailable()
	return r == "", r
}

func (b *Backend) unavailable() string {
	if b.disabled("namespaces") {
		return "namespace creation is disabled"
	}
	if b.root {
		return ""
	}
	if b.disabled("userns") {
		return "user namespace creation is disabled, and the host is not root"
	}
	exe := b.opts.InitPath
	if exe == "" {
		exe, _ = os.Executable()
	}
	if why := b.opts.Host.Blocked(exe); why != "" {
		return why
	}
	// The settings allow it; a container's seccomp profile, say, may still forbid it.
	p := &spawn.Proc{}
	defer p.Close()
	err := p.Start(exe, &launch.Spec{Trial: true}, &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}}, io.Discard, io.Discard)
	if err == nil {
		if exit := p.Wait(); exit.Code != 0 {
			err = fmt.Errorf("the init helper exited with status %d %s", exit.Code, exit.Signal)
		}
	}
	if err != nil {
		return fmt.Sprintf("making a user namespace failed (%v): if this runs in a container, its seccomp profile or "+
			"runtime may forbid it; otherwise run as root", err)
	}
	return ""
}

func (b *Backend) disabled(what string) bool { return b.opts.Disabled(what) }

// RunsCommands: a command runs in the same namespaces and limits as a program.
func (b *Backend) RunsCommands() bool { return true }

// EgressByRules: the child's network namespace can have the egress proxy as its one route.
func (b *Backend) EgressByRules() bool { return true }

// Name is "namespaces".
func (b *Backend) Name() string { return "namespaces" }

// Python is the interpreter the backend runs.
func (b *Backend) Python() string { return b.base.Python }

// Mechanisms lists what this backend applies here.
func (b *Backend) Mechanisms() []string {
	m := []string{"mount-namespace", "pivot-root", "pid-namespace", "net-namespace", "ipc-namespace", "uts-namespace",
		"rlimits", "no_new_privs", "scrubbed-env", "tmpfs-workspace"}
	if !b.root {
		m = append(m, "user-namespace")
	}
	if b.sub != nil {
		m = append(m, "subordinate-ids")
	}
	if b.base.Drop || b.sub != nil {
		m = append(m, "identity-drop")
	}
	if b.base.Cgroups != nil {
		m = append(m, "cgroup-"+b.base.Cgroups.Version())
	}
	if !b.disabled("seccomp") {
		m = append(m, "seccomp-policy", "seccomp-deny-inet")
	}
	if b.templateUnusable() == "" {
		m = append(m, "warm-template-fork") // a warm pool's children without network are forked
	}
	return m
}

// Start launches one child.
func (b *Backend) Start(ctx context.Context, spec engine.LaunchSpec) (engine.Child, error) {
	if why := b.templateWhy(spec); why == "" {
		c, err := b.startForked(ctx, spec)
		if err == nil {
			return c, nil
		}
		b.logTemplateWhy(err.Error())
	} else if b.opts.Template && (spec.Pooled || b.opts.forkAll) {
		b.logTemplateWhy(why)
	}
	// Under network rules the child has a network namespace too, and inet sockets (only its
	// loopback is there, where the egress proxy listens): the proxy is its one route out.
	netns := spec.Terms.Network == engine.NetworkNone || spec.Egress != nil
	c := &spawned.Child{Proc: &spawn.Proc{Status: true, Egress: spec.Egress != nil, EgressPort: engine.EgressPort},
		Containment: engine.Facts{MountBoundary: true, PIDNamespace: true, NetNamespace: netns, Seccomp: netns && !b.disabled("seccomp")}}
	id, err := b.base.Lease(ctx, c, spec.Ahead)
	if err != nil {
		return nil, err
	}
	ok := false
	defer c.CloseUnless(&ok)
	uid, gid := 0, 0 // inside a user namespace, the caller is mapped to 0
	switch {
	case b.base.Drop || b.sub != nil:
		uid, gid = id.UID, id.GID
	case b.root:
		uid, gid = os.Geteuid(), os.Getegid()
	}
	if b.sub != nil {
		// The grade compares uids as the child sees them: the host's is 0 in there.
		c.Containment.HostUID, c.Containment.RunAsUID = 0, id.UID
	}
	tag, root, err := b.rootMountPoint(0o700)
	if err != nil {
		return nil, err
	}
	c.Cleanup = append([]func(){func() { _ = os.Remove(root) }}, c.Cleanup...)
	workspace := "/workspace-" + tag
	// The tmpfs workspace is reachable through the init's root, which lives as long as the
	// program does.
	c.WorkspacePath = func() string { return "/proc/" + strconv.Itoa(c.Pid()) + "/root" + workspace }
	home := workspace
	env := spawn.Env(home, b.opts.Env)
	files := etcFiles(uid, gid, home)
	if spec.Egress != nil {
		for k, v := range engine.EgressEnv() {
			env = append(env, k+"="+v)
		}
		files[engine.EgressCAPath] = string(spec.Egress.CAPEM)
	}
	python, argv := b.base.Python, append([]string{b.base.Python}, b.base.Argv(spec.Argv)...)
	if len(spec.Command) > 0 {
		python, argv = spec.Command[0], spec.Command
		for _, k := range slices.Sorted(maps.Keys(spec.CommandEnv)) {
			env = append(env, k+"="+spec.CommandEnv[k])
		}
	}
	ls := &launch.Spec{
		Python: python, Argv: argv, Env: env, StdioChannel: len(spec.Command) > 0,
		Dir: workspace, ChannelParent: true, Reaper: true, Drop: b.base.Drop || b.sub != nil, UID: uid, GID: gid,
		UserNamespace: !b.root,
		// As root the init confines itself and execs the interpreter as its child, which sets
		// its rlimits as its first statements: one helper start fewer. Without root its
		// capabilities come from the exec of pid 2 (its maps are written after it starts); a
		// command (a contained server) is no interpreter started with -c.
		ExecsProgram: b.root && len(spec.Command) == 0,
		Rlimits: launch.Rlimits{CPUSeconds: engine.CPURlimit(spec.Terms.CPUSeconds), CPUHard: engine.CPUHardRlimit(spec.Terms.CPUSeconds), AS: uint64(spec.Terms.MemoryBytes),
			FSize: uint64(spec.Terms.FileSizeBytes), NProc: uint64(spec.Terms.ProcessCount), NoFile: 1024},
		DenyInet: c.Containment.Seccomp && spec.Egress == nil, Seccomp: !b.disabled("seccomp"),
		Mounts: &launch.Mounts{
			Root: root, ReadOnly: slices.Concat(spawned.SystemPaths, b.base.RODirs), Devices: spawned.Devices,
			Files:     files,
			Workspace: workspace, WorkspaceBytes: b.opts.WorkspaceBytes, TmpBytes: b.opts.TmpBytes,
			Proc: true, Loopback: netns, Hostname: "sandbox",
		},
	}
	for _, p := range spec.Paths {
		ls.Mounts.Binds = append(ls.Mounts.Binds, launch.Bind{Path: p.Path, Writable: p.Writable})
	}
	if b.root && !b.base.Drop {
		// Root without the identity drop: RLIMIT_NPROC would count the host's every root
		// process (and root may exceed it). In a user namespace the kernel counts the limit
		// per (namespace, uid), so there it binds the sandbox's own processes.
		ls.Rlimits.NProc = 0
	}
	if err := c.JoinCgroup(b.base.Cgroups, owner.Name("ns"), spec.Terms, 1, ls); err != nil {
		return nil, err
	}
	attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS}
	if netns {
		attr.Cloneflags |= syscall.CLONE_NEWNET
	}
	switch {
	case b.root:
	case b.sub != nil:
		// newuidmap and newgidmap write the maps once the helper is started; it waits.
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		c.Containment.UserNamespace = true
		c.MapIDs = b.mapper(ctx, id)
	default:
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		c.Containment.UserNamespace = true
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
		attr.GidMappingsEnableSetgroups = false
	}
	if err := c.Start(b.base.InitPath, ls, attr, spec.Stdout, spec.Stderr); err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "%v", err)
	}
	if spec.Egress != nil {
		if err := c.ReceiveEgress(ctx); err != nil {
			return nil, failure.Wrap(failure.BackendUnavailable, err, "%v", err)
		}
	}
	ok = true
	return c, nil
}

// TemplateWhy says why a namespaces backend of options would exec its warm children instead of
// forking them from templates, or "" when it would fork them. It starts no child.
func TemplateWhy(ctx context.Context, options *Options) string {
	b, err := New(ctx, options)
	if err != nil {
		_, why := engine.RefusalOf(err)
		return why
	}
	defer b.Close()
	return b.TemplateWhy()
}
