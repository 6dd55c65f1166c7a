//go:build darwin

package seatbelt

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/launch"
	"github.com/mcp-sandbox/mcp-sandbox/internal/python"
	"github.com/mcp-sandbox/mcp-sandbox/internal/spawn"
	"golang.org/x/sys/unix"
)

// libraryRoots are the read-only trees an interpreter installed by Homebrew or python.org
// links against (OpenSSL, SQLite, Tcl under /opt/homebrew/opt → Cellar), where they exist.
var libraryRoots = []string{"/opt/homebrew/Cellar", "/opt/homebrew/opt", "/usr/local/Cellar", "/usr/local/opt",
	"/Library/Frameworks/Python.framework"}

// candidates are the interpreters tried before PATH: a desktop app's PATH is /usr/bin:/bin,
// where python3 is the Command Line Tools' shim.
var candidates = []string{"/opt/homebrew/bin/python3", "/usr/local/bin/python3",
	"/Library/Frameworks/Python.framework/Versions/Current/bin/python3"}

// Available reports whether sandbox-exec is here, and why not.
func Available() (bool, string) {
	if _, err := os.Stat(SandboxExec); err != nil {
		return false, SandboxExec + " is missing (" + err.Error() + "); it ships with macOS"
	}
	return true, ""
}

// Backend is the seatbelt backend.
type Backend struct {
	opts   Options
	python string
	info   python.Info
	ro     []string
	base   string
}

// New resolves the interpreter and its directories and the workspace directory. It starts
// no child.
func New(ctx context.Context, options *Options) (*Backend, error) {
	var o Options
	if options != nil {
		o = *options
	}
	if ok, why := Available(); !ok {
		return nil, failure.New(failure.BackendUnavailable, "%s", why)
	}
	if o.InitPath == "" {
		p, err := os.Executable()
		if err != nil {
			return nil, failure.Wrap(failure.BackendUnavailable, err, "finding this executable: %v", err)
		}
		o.InitPath = p
	}
	lookPath := func(name string) (string, error) {
		for _, c := range candidates {
			if st, err := os.Stat(c); err == nil && st.Mode()&0o111 != 0 {
				return c, nil
			}
		}
		return exec.LookPath(name)
	}
	py, err := python.Find(o.Python, os.Geteuid(), os.Getegid(), lookPath)
	if err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "%v", err)
	}
	info, err := python.InspectCached(ctx, py, engine.BootstrapSource, o.CacheDir)
	if err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "%v", err)
	}
	b := &Backend{opts: o, python: py, info: info}
	for _, p := range append(append([]string{py, filepath.Dir(py)}, info.Dirs...), libraryRoots...) {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			b.ro = append(b.ro, r)
			if st, err := os.Stat(r); err == nil && !st.IsDir() {
				b.ro = append(b.ro, filepath.Dir(r))
			}
		}
	}
	base := o.WorkspaceBase
	if base == "" {
		base = os.TempDir()
	}
	b.base = filepath.Join(base, "mcp-sandbox-workspaces")
	if err := os.Mkdir(b.base, 0o711); err != nil && !os.IsExist(err) {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "preparing the workspace directory: %v", err)
	}
	if b.base, err = filepath.EvalSymlinks(b.base); err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "resolving the workspace directory: %v", err)
	}
	return b, nil
}

// Name is "seatbelt".
func (b *Backend) Name() string { return "seatbelt" }

// Python is the interpreter the backend runs.
func (b *Backend) Python() string { return b.python }

// Mechanisms lists what this backend applies.
func (b *Backend) Mechanisms() []string {
	return []string{"seatbelt", "rlimits", "process-group", "uid-sweep", "scrubbed-env", "ephemeral-workspace"}
}

// Start launches one child: the init helper, which sets the rlimits and execs sandbox-exec
// with this execution's profile, which execs the interpreter.
func (b *Backend) Start(ctx context.Context, spec engine.LaunchSpec) (engine.Child, error) {
	ws, err := os.MkdirTemp(b.base, "mcp-sandbox-ws-")
	if err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "creating the workspace failed")
	}
	c := &child{workspace: ws, temp: ws + ".tmp", uid: os.Geteuid(), waited: make(chan struct{}),
		facts: engine.Facts{HostUID: os.Geteuid(), RunAsUID: os.Geteuid(), NoMemoryCap: true}}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	if err := os.Mkdir(c.temp, 0o700); err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "creating the temporary directory failed")
	}
	env := spawn.Env(ws, b.opts.Env)
	for i, kv := range env {
		if strings.HasPrefix(kv, "TMPDIR=") {
			env[i] = "TMPDIR=" + c.temp
		}
	}
	argv, err := Args(Policy{Python: b.python, ReadOnly: b.ro, Workspace: ws, Temp: c.temp,
		Network: spec.Terms.Network == engine.NetworkUnrestricted}, b.info.Argv(spec.Argv, engine.BootstrapSource))
	if err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "%v", err)
	}
	t := spec.Terms
	ls := &launch.Spec{Python: SandboxExec, Argv: argv, Env: env, Dir: ws, ParentPID: os.Getpid(),
		Rlimits: launch.Rlimits{CPUSeconds: engine.CPURlimit(t.CPUSeconds), CPUHard: engine.CPUHardRlimit(t.CPUSeconds),
			FSize: uint64(t.FileSizeBytes), NProc: uint64(t.ProcessCount), NoFile: 1024}}
	if err := c.start(b.opts.InitPath, ls, spec.Stdout, spec.Stderr); err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "%v", err)
	}
	ok = true
	return c, nil
}

// child is one started execution: the helper, then sandbox-exec, then the interpreter, all
// one process (each execs the next) leading its own process group.
type child struct {
	workspace, temp string
	uid             int
	facts           engine.Facts

	cmd     *exec.Cmd
	conn    *net.UnixConn
	out     spawn.Output
	waited  chan struct{}
	exit    engine.Exit
	wait    sync.Once
	reaped  atomic.Bool // the leader was reaped: its pid, the group's id, may be reused
	closing sync.Once
}

func (c *child) start(initPath string, ls *launch.Spec, stdout, stderr io.Writer) error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		return fmt.Errorf("socketpair: %w", err)
	}
	unix.CloseOnExec(fds[0])
	unix.CloseOnExec(fds[1])
	host, theirs := os.NewFile(uintptr(fds[0]), "channel"), os.NewFile(uintptr(fds[1]), "channel-child")
	defer theirs.Close()
	fc, err := net.FileConn(host)
	host.Close()
	if err != nil {
		return err
	}
	c.conn = fc.(*net.UnixConn)
	cmd := exec.Command(initPath, launch.Command)
	cmd.Env = ls.Environ()
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	closeWrites, err := c.out.Attach(cmd, stdout, stderr)
	defer closeWrites()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the init helper: %w", err)
	}
	c.cmd = cmd
	return nil
}

func (c *child) Channel() io.ReadWriteCloser { return c.conn }
func (c *child) Facts() engine.Facts         { return c.facts }

func (c *child) Workspace() string {
	select {
	case <-c.waited:
		return ""
	default:
		return c.workspace
	}
}

// Wait waits for the main process (the interpreter, in the helper's place).
func (c *child) Wait() engine.Exit {
	c.wait.Do(func() {
		defer close(c.waited)
		if c.cmd == nil {
			c.exit = engine.Exit{Code: -1, Err: fmt.Errorf("the child never started")}
			return
		}
		err := c.cmd.Wait()
		c.reaped.Store(true)
		st := c.cmd.ProcessState
		if st == nil {
			c.exit = engine.Exit{Code: -1, Err: err}
			return
		}
		c.exit = engine.Exit{Code: st.ExitCode(), CPUSeconds: (st.UserTime() + st.SystemTime()).Seconds()}
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			c.exit.Code, c.exit.Signal = -1, ws.Signal().String()
		}
	})
	return c.exit
}

// Kill sends SIGKILL to the child's process group, then sweeps the uid for strays.
func (c *child) Kill() {
	if c.cmd == nil || c.cmd.Process == nil {
		return
	}
	pgid := c.cmd.Process.Pid
	if c.reaped.Load() && unix.Kill(pgid, 0) != unix.ESRCH {
		// The leader was reaped and its pid is in use again: by another process, which may
		// lead a group of that id. No group of ours can be left then (a pid is not handed out
		// while a group of that id has members), so there is nothing to kill.
		return
	}
	_ = unix.Kill(-pgid, unix.SIGKILL)
	sweep(c.uid, pgid)
}

// sweep kills, until a pass finds none, the uid's processes that are in process group pgid
// or descend from one that is: a child that left the group with setsid is found through its
// parent while that parent lives. An orphan whose parent has already exited (a double fork)
// is reparented to launchd and can no longer be told from the user's other processes; that
// is why process_tree is graded unavailable here.
func sweep(uid, pgid int) {
	for pass := 0; pass < 8; pass++ {
		procs, err := unix.SysctlKinfoProcSlice("kern.proc.uid", uid)
		if err != nil {
			return
		}
		ours := map[int32]bool{}
		for grew := true; grew; {
			grew = false
			for _, p := range procs {
				pid := p.Proc.P_pid
				if !ours[pid] && pid > 1 && (p.Eproc.Pgid == int32(pgid) || ours[p.Eproc.Ppid]) {
					ours[pid], grew = true, true
				}
			}
		}
		if len(ours) == 0 {
			return
		}
		for pid := range ours {
			_ = unix.Kill(int(pid), unix.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Close kills what is left, waits for the output copies (bounded), and removes the
// workspace and its temporary directory.
func (c *child) Close() engine.TreeUsage {
	c.closing.Do(func() {
		c.Kill()
		if c.cmd != nil {
			done := make(chan struct{})
			go func() { c.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
			}
		}
		if c.conn != nil {
			c.conn.Close()
		}
		c.out.Close(2 * time.Second)
		_ = os.RemoveAll(c.workspace)
		_ = os.RemoveAll(c.temp)
	})
	return engine.TreeUsage{}
}
