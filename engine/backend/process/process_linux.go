package process

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/cgroup"
	"github.com/mcp-sandbox/mcp-sandbox/internal/launch"
	"github.com/mcp-sandbox/mcp-sandbox/internal/python"
	"golang.org/x/sys/unix"
)

// Options configure the process backend. cmd/ resolves them from the profile.
type Options struct {
	// Python is the interpreter; python.Find resolves it when empty.
	Python string
	// RunAs is "uid:gid" or a range "FIRST-LAST"; used when the host is root.
	RunAs string
	// Env holds the env_allowlist variables with their values, resolved by the caller.
	Env map[string]string
	// WorkspaceBase is where per-execution workspaces are made (default: the system temp dir).
	WorkspaceBase string
	// InitPath is the binary re-executed as the init helper (default: this executable).
	InitPath string
	// Disable turns mechanisms off, to test that their absence is graded and refused:
	// "cgroup", "landlock", "seccomp", "identity".
	Disable []string
}

// Backend is the process-level backend.
type Backend struct {
	opts     Options
	python   string
	roDirs   []string
	ids      *identities
	cg       *cgroup.Manager
	cgErr    error
	landlock bool
	seccomp  bool
	drop     bool
}

// New prepares the backend: it resolves the interpreter and its directories and detects the
// mechanisms this host offers. It starts no child.
func New(ctx context.Context, opts Options) (*Backend, error) {
	if opts.RunAs == "" {
		opts.RunAs = "65534:65534"
	}
	ids, err := parseRunAs(opts.RunAs)
	if err != nil {
		return nil, err
	}
	if opts.InitPath == "" {
		if opts.InitPath, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	if opts.WorkspaceBase == "" {
		opts.WorkspaceBase = os.TempDir()
	}
	b := &Backend{opts: opts, ids: ids, drop: os.Geteuid() == 0 && !disabled(opts, "identity")}
	probeID, release, _ := ids.lease(context.Background())
	release()
	uid, gid := os.Geteuid(), os.Getegid()
	if b.drop {
		uid, gid = probeID.UID, probeID.GID
	}
	if b.python, err = python.Find(opts.Python, uid, gid, exec.LookPath); err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "%v", err)
	}
	if b.roDirs, err = python.Dirs(ctx, b.python); err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "%v", err)
	}
	if !disabled(opts, "cgroup") && os.Geteuid() == 0 {
		b.cg, b.cgErr = cgroup.Detect("mcp-sandbox")
	} else {
		b.cgErr = fmt.Errorf("cgroups need root here")
	}
	b.landlock = !disabled(opts, "landlock") && landlockABI() > 0
	b.seccomp = !disabled(opts, "seccomp")
	return b, nil
}

func disabled(o Options, what string) bool {
	for _, d := range o.Disable {
		if d == what {
			return true
		}
	}
	return false
}

func landlockABI() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, 1 /* LANDLOCK_CREATE_RULESET_VERSION */)
	if errno != 0 {
		return 0
	}
	return int(v)
}

// Name is "process".
func (b *Backend) Name() string { return "process" }

// Python is the interpreter the backend runs.
func (b *Backend) Python() string { return b.python }

// Mechanisms lists what this backend applies here.
func (b *Backend) Mechanisms() []string {
	m := []string{"rlimits", "setsid", "no_new_privs", "scrubbed-env", "ephemeral-workspace"}
	if b.drop {
		m = append(m, "identity-drop")
	}
	if b.cg != nil {
		m = append(m, "cgroup-"+b.cg.Version())
	}
	if b.landlock {
		m = append(m, fmt.Sprintf("landlock-abi-%d", landlockABI()))
	}
	if b.seccomp {
		m = append(m, "seccomp-deny-inet")
	}
	return m
}

// systemRO are read-only paths every interpreter needs besides its own directories.
var systemRO = []string{"/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache", "/etc/localtime",
	"/etc/nsswitch.conf", "/etc/passwd", "/etc/group", "/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"}

// Start launches one child.
func (b *Backend) Start(ctx context.Context, spec engine.LaunchSpec) (engine.Child, error) {
	id, release, err := b.ids.lease(ctx)
	if err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "%v", err)
	}
	c := &child{release: release, facts: engine.Facts{HostUID: os.Geteuid(), RunAsUID: os.Geteuid(),
		Landlock: b.landlock, Seccomp: b.seccomp && spec.Terms.Network == engine.NetworkNone}}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	if b.drop {
		c.facts.RunAsUID, c.facts.ExclusiveUID = id.UID, id.Exclusive
		c.killUID = id.Exclusive
		c.uid = id.UID
	}
	if c.workspace, err = b.makeWorkspace(id); err != nil {
		return nil, err
	}
	ls := &launch.Spec{
		Python: b.python, Argv: append([]string{b.python}, spec.Argv...), Env: b.env(c.workspace),
		Dir: c.workspace, ParentPID: os.Getpid(), Drop: b.drop, UID: id.UID, GID: id.GID,
		Rlimits: launch.Rlimits{CPUSeconds: engine.CPURlimit(spec.Terms.CPUSeconds), AS: uint64(spec.Terms.MemoryBytes),
			FSize: uint64(spec.Terms.FileSizeBytes), NProc: uint64(spec.Terms.ProcessCount), NoFile: 1024},
		DenyInet: c.facts.Seccomp,
	}
	if b.landlock {
		ls.Landlock = &launch.Landlock{ReadOnly: append(append([]string{}, b.roDirs...), systemRO...),
			ReadWrite: []string{c.workspace, "/dev/null"}}
	}
	if b.cg != nil {
		g, err := b.cg.New(filepath.Base(c.workspace), spec.Terms.MemoryBytes, spec.Terms.ProcessCount+1)
		if err != nil {
			return nil, failure.Wrap(failure.BackendUnavailable, err, "creating the execution's cgroup failed")
		}
		c.group = g
		c.facts.Cgroup = true
		ls.CgroupProcs = g.ProcsFiles()
	}
	if err := c.start(b.opts.InitPath, ls, nil, spec); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

func (b *Backend) env(workspace string) []string {
	env := []string{"HOME=" + workspace, "TMPDIR=" + workspace, "PATH=/usr/local/bin:/usr/bin:/bin",
		"PYTHONDONTWRITEBYTECODE=1", "LC_CTYPE=C.UTF-8"}
	keys := make([]string, 0, len(b.opts.Env))
	for k := range b.opts.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+b.opts.Env[k])
	}
	return env
}

func (b *Backend) makeWorkspace(id Identity) (string, error) {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	dir := filepath.Join(b.opts.WorkspaceBase, "mcp-sandbox-ws-"+hex.EncodeToString(rnd[:]))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", failure.Wrap(failure.BackendUnavailable, err, "creating the workspace failed")
	}
	if b.drop {
		if err := os.Chown(dir, id.UID, id.GID); err != nil {
			os.Remove(dir)
			return "", failure.Wrap(failure.BackendUnavailable, err, "handing the workspace to uid %d failed", id.UID)
		}
	}
	return dir, nil
}

// child is one started execution of this backend.
type child struct {
	cmd       *exec.Cmd
	conn      net.Conn
	facts     engine.Facts
	workspace string
	group     *cgroup.Group
	uid       int
	killUID   bool
	initPath  string
	release   func()

	copies  sync.WaitGroup
	readEnd []*os.File

	waitOnce sync.Once
	exit     engine.Exit
	waited   chan struct{}

	closeOnce sync.Once
	usage     engine.TreeUsage
}

// start runs the init helper with spec; attr adds to the SysProcAttr (namespaces use it).
func (c *child) start(initPath string, ls *launch.Spec, attr *syscall.SysProcAttr, spec engine.LaunchSpec) error {
	c.initPath = initPath
	c.waited = make(chan struct{})
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return failure.Wrap(failure.BackendUnavailable, err, "socketpair failed")
	}
	hostEnd := os.NewFile(uintptr(fds[0]), "channel")
	childEnd := os.NewFile(uintptr(fds[1]), "channel-child")
	defer childEnd.Close()
	conn, err := net.FileConn(hostEnd)
	hostEnd.Close()
	if err != nil {
		return failure.Wrap(failure.BackendUnavailable, err, "channel setup failed")
	}
	c.conn = conn
	js, _ := json.Marshal(ls)
	cmd := exec.Command(initPath, launch.Command)
	cmd.Env = []string{launch.SpecEnv + "=" + string(js)}
	cmd.ExtraFiles = []*os.File{childEnd}
	if attr == nil {
		attr = &syscall.SysProcAttr{}
	}
	attr.Setsid = true
	attr.Pdeathsig = syscall.SIGKILL
	cmd.SysProcAttr = attr
	var writeEnds []*os.File
	for _, sink := range []io.Writer{spec.Stdout, spec.Stderr} {
		r, w, err := os.Pipe()
		if err != nil {
			return failure.Wrap(failure.BackendUnavailable, err, "pipe failed")
		}
		c.readEnd = append(c.readEnd, r)
		writeEnds = append(writeEnds, w)
		c.copies.Add(1)
		go func(sink io.Writer, r *os.File) {
			defer c.copies.Done()
			_, _ = io.Copy(sink, r)
		}(sink, r)
	}
	cmd.Stdout, cmd.Stderr = writeEnds[0], writeEnds[1]
	err = cmd.Start()
	for _, w := range writeEnds {
		w.Close()
	}
	if err != nil {
		return failure.Wrap(failure.BackendUnavailable, err, "starting the init helper failed")
	}
	c.cmd = cmd
	return nil
}

func (c *child) Channel() io.ReadWriteCloser { return c.conn }
func (c *child) Facts() engine.Facts        { return c.facts }

func (c *child) Wait() engine.Exit {
	c.waitOnce.Do(func() {
		defer close(c.waited)
		err := c.cmd.Wait()
		ps := c.cmd.ProcessState
		if ps == nil {
			c.exit = engine.Exit{Code: -1, Err: err}
			return
		}
		c.exit = engine.Exit{Code: ps.ExitCode(), CPUSeconds: (ps.UserTime() + ps.SystemTime()).Seconds()}
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			c.exit.Signal = ws.Signal().String()
		}
	})
	<-c.waited
	return c.exit
}

// Kill kills the whole tree: the cgroup, the process group, and an exclusive uid.
func (c *child) Kill() {
	if c.cmd != nil && c.cmd.Process != nil {
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		_ = c.cmd.Process.Kill()
	}
	if c.group != nil {
		c.group.Kill()
	}
	if c.killUID && c.uid > 0 && c.initPath != "" {
		killer := exec.Command(c.initPath, launch.Command)
		js, _ := json.Marshal(&launch.Spec{KillUID: c.uid})
		killer.Env = []string{launch.SpecEnv + "=" + string(js)}
		_ = killer.Run()
	}
}

// Close kills what is left, drains the output (bounded), and removes the workspace, the
// cgroup and the identity lease.
func (c *child) Close() engine.TreeUsage {
	c.closeOnce.Do(func() {
		if c.cmd != nil {
			c.Kill()
			c.Wait()
		}
		drained := make(chan struct{})
		go func() { c.copies.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-time.After(2 * time.Second):
			// Something outside our reach still holds a pipe: stop reading it.
			for _, r := range c.readEnd {
				r.Close()
			}
			<-drained
		}
		for _, r := range c.readEnd {
			r.Close()
		}
		if c.conn != nil {
			c.conn.Close()
		}
		if c.group != nil {
			ev := c.group.Events()
			c.usage = engine.TreeUsage{OOMKilled: ev.OOMKills > 0, PIDsLimitHit: ev.PIDsMax > 0}
			_ = c.group.Remove()
		}
		if c.workspace != "" {
			_ = os.RemoveAll(c.workspace)
		}
		if c.release != nil {
			c.release()
		}
	})
	return c.usage
}
