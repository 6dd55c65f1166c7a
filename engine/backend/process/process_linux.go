package process

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/spawned"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/identity"
	"github.com/mcp-sandbox/mcp-sandbox/internal/launch"
	"github.com/mcp-sandbox/mcp-sandbox/internal/owner"
	"github.com/mcp-sandbox/mcp-sandbox/internal/spawn"
)

// Backend is the process-level backend.
type Backend struct {
	opts Options
	base *spawned.Base
	// landlockABI is the kernel's Landlock ABI, read once; 0 where it is absent or disabled.
	landlockABI int
	seccomp     bool
}

// New prepares the backend: it resolves the interpreter and its directories and detects the
// mechanisms this host offers. It starts no child.
func New(ctx context.Context, options *Options) (*Backend, error) {
	var opts Options
	if options != nil {
		opts = *options
	}
	base, err := spawned.Resolve(ctx, &opts.Options, nil)
	if err != nil {
		return nil, err
	}
	if opts.WorkspaceBase == "" {
		opts.WorkspaceBase = os.TempDir()
	}
	if opts.WorkspaceBase, err = workspaceParent(opts.WorkspaceBase); err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "preparing the workspace directory: %v", err)
	}
	// Workspaces (warm children's among them) that a killed server left: only those whose
	// owner is provably dead (internal/owner).
	if n := owner.Sweep(opts.WorkspaceBase, workspacePrefix, os.RemoveAll); n > 0 {
		slog.Info("swept workspaces a stopped server left", "count", n, "dir", opts.WorkspaceBase)
	}
	b := &Backend{opts: opts, base: base}
	if !opts.Disabled("landlock") {
		b.landlockABI = launch.LandlockABI()
	}
	b.seccomp = !opts.Disabled("seccomp")
	return b, nil
}

// Name is "process".
func (b *Backend) Name() string { return "process" }

// Python is the interpreter the backend runs.
func (b *Backend) Python() string { return b.base.Python }

// Mechanisms lists what this backend applies here.
func (b *Backend) Mechanisms() []string {
	m := []string{"rlimits", "setsid", "no_new_privs", "scrubbed-env", "ephemeral-workspace"}
	if b.base.Drop {
		m = append(m, "identity-drop")
	}
	if b.base.Cgroups != nil {
		m = append(m, "cgroup-"+b.base.Cgroups.Version())
	} else {
		m = append(m, "subreaper")
	}
	if b.landlockABI > 0 {
		m = append(m, fmt.Sprintf("landlock-abi-%d", b.landlockABI))
	}
	if b.seccomp {
		m = append(m, "seccomp-policy", "seccomp-deny-inet")
	}
	return m
}

// hostFiles are what Landlock grants read-only beyond spawned.SystemPaths and spawned.Devices:
// the program runs in the host's own file system, where reading a user or group name (the
// pwd and grp modules, getpass) reads the host's databases and the name service switch that
// says where they are. The isolated backends have no such need: the namespaces backend writes
// an /etc/passwd and /etc/group of its own into the root it makes, bwrap's root has none.
var hostFiles = []string{"/etc/nsswitch.conf", "/etc/passwd", "/etc/group"}

// readOnly is every path Landlock grants read-only: the interpreter's directories, the system
// paths, the devices and the host files.
func (b *Backend) readOnly() []string {
	return slices.Concat(b.base.RODirs, spawned.SystemPaths, spawned.Devices, hostFiles)
}

// Start launches one child.
func (b *Backend) Start(ctx context.Context, spec engine.LaunchSpec) (engine.Child, error) {
	// With a cgroup the helper execs Python in its own place, and the host waits for the
	// interpreter itself. Without one the helper stays as the tree's subreaper, kills it to
	// the last process, and reports the interpreter's status.
	subreaper := b.base.Cgroups == nil
	c := &spawned.Child{Proc: &spawn.Proc{Interpreter: !subreaper, Status: subreaper, Subreaper: subreaper, Unkillable: b.base.SignalRefused}, Containment: engine.Facts{
		Landlock: b.landlockABI > 0, SignalScoped: b.landlockABI >= 6, Subreaper: subreaper, Unkillable: b.base.SignalRefused,
		Seccomp: b.seccomp && spec.Terms.Network == engine.NetworkNone}}
	id, err := b.base.Lease(ctx, c, spec.Ahead)
	if err != nil {
		return nil, err
	}
	ok := false
	defer c.CloseUnless(&ok)
	workspace, err := b.makeWorkspace(id)
	if err != nil {
		return nil, err
	}
	c.WorkspacePath = func() string { return workspace } // the host sees it as the program does
	c.Cleanup = append([]func(){func() { _ = os.RemoveAll(workspace) }}, c.Cleanup...)
	ls := &launch.Spec{
		Python: b.base.Python, Argv: append([]string{b.base.Python}, b.base.Argv(spec.Argv)...), Env: b.env(workspace),
		Dir: workspace, ParentPID: os.Getpid(), Drop: b.base.Drop, UID: id.UID, GID: id.GID,
		Rlimits: launch.Rlimits{CPUSeconds: engine.CPURlimit(spec.Terms.CPUSeconds), CPUHard: engine.CPUHardRlimit(spec.Terms.CPUSeconds), AS: uint64(spec.Terms.MemoryBytes),
			FSize: uint64(spec.Terms.FileSizeBytes), NProc: uint64(spec.Terms.ProcessCount), NoFile: 1024},
		DenyInet: c.Containment.Seccomp, Seccomp: b.seccomp, Reaper: subreaper, Subreaper: subreaper,
	}
	if b.landlockABI > 0 {
		ls.Landlock = &launch.Landlock{ReadOnly: b.readOnly(),
			ReadWrite: []string{workspace, "/dev/null"}}
	}
	if err := c.JoinCgroup(b.base.Cgroups, filepath.Base(workspace), spec.Terms, 1, ls); err != nil {
		return nil, err
	}
	if err := c.Start(b.base.InitPath, ls, nil, spec.Stdout, spec.Stderr); err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "%v", err)
	}
	ok = true
	return c, nil
}

func (b *Backend) env(workspace string) []string { return spawn.Env(workspace, b.opts.Env) }

// workspaceParent returns a directory under base that holds the workspaces: owned by this
// process's user and searchable but not writable by anyone else (0711). In a world-writable
// base (/tmp) a sandbox that owned an entry of the base itself could rename its workspace
// away and plant a link in its place for the host to collect from or remove; in here it owns
// only its workspace. An existing directory of that name that is not ours, or a link, is
// passed over for a fresh one.
func workspaceParent(base string) (string, error) {
	dir := filepath.Join(base, "mcp-sandbox-workspaces")
	if err := os.Mkdir(dir, 0o711); err != nil && !os.IsExist(err) {
		return "", err
	}
	if st, err := os.Lstat(dir); err == nil && st.IsDir() && st.Mode().Perm() == 0o711 && ownedByMe(st) {
		return dir, nil
	}
	if st, err := os.Lstat(dir); err == nil && st.IsDir() && ownedByMe(st) {
		if err := os.Chmod(dir, 0o711); err == nil {
			return dir, nil
		}
	}
	dir, err := os.MkdirTemp(base, "mcp-sandbox-workspaces-")
	if err != nil {
		return "", err
	}
	return dir, os.Chmod(dir, 0o711)
}

func ownedByMe(st os.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && int(sys.Uid) == os.Geteuid()
}

// workspacePrefix starts the name of every workspace, which carries its server's owner tag.
const workspacePrefix = "mcp-sandbox-ws"

func (b *Backend) makeWorkspace(id identity.Identity) (string, error) {
	dir := filepath.Join(b.opts.WorkspaceBase, owner.Name(workspacePrefix))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", failure.Wrap(failure.BackendUnavailable, err, "creating the workspace failed")
	}
	if b.base.Drop {
		if err := os.Chown(dir, id.UID, id.GID); err != nil {
			os.Remove(dir)
			return "", failure.Wrap(failure.BackendUnavailable, err, "handing the workspace to uid %d failed", id.UID)
		}
	}
	return dir, nil
}
