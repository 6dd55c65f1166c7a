//go:build windows

package jobobject

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/spawn"
	"github.com/mcp-sandbox/mcp-sandbox/internal/tokenconn"
)

// Available reports whether a Windows CPython is to be found, and why not.
func Available(python string) (bool, string) {
	if _, err := findPython(python); err != nil {
		return false, err.Error()
	}
	return true, ""
}

func findPython(configured string) (string, error) {
	p := configured
	if p == "" {
		var err error
		if p, err = exec.LookPath("python.exe"); err != nil {
			return "", fmt.Errorf("no python.exe on PATH: install CPython for Windows (python.org) or set python: in the profile")
		}
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(abs); err != nil || st.IsDir() {
		return "", fmt.Errorf("python %q is not a file (%v)", p, err)
	}
	return abs, nil
}

// probes holds, per binary and bound, what Probe found: once per process, since the platform
// does not change under it.
var probes sync.Map // string -> *probeOnce

type probeOnce struct {
	once sync.Once
	e    Enforcement
}

// Backend is the jobobject backend.
type Backend struct {
	opts   Options
	python string
	base   string
	enf    Enforcement
}

// NewBackend resolves the interpreter and the workspace directory and runs Probe (once per
// process), whose grades every child of the backend carries. A platform where closing a job
// did not end its tree has no backend: nothing else could end a program's processes.
func NewBackend(ctx context.Context, options *Options) (*Backend, error) {
	var o Options
	if options != nil {
		o = *options
	}
	py, err := findPython(o.Python)
	if err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "%v", err)
	}
	if o.Self == "" {
		if o.Self, err = os.Executable(); err != nil {
			return nil, failure.Wrap(failure.BackendUnavailable, err, "finding this executable: %v", err)
		}
	}
	if o.ProbeBound <= 0 {
		o.ProbeBound = 20 * time.Second
	}
	v, _ := probes.LoadOrStore(o.Self+"\x00"+o.ProbeBound.String(), &probeOnce{})
	p := v.(*probeOnce)
	p.once.Do(func() { p.e = Probe(context.WithoutCancel(ctx), o.Self, o.ProbeBound) })
	if !p.e.KillOnClose {
		return nil, failure.New(failure.BackendUnavailable, "a Job Object did not end its tree here, so nothing could end a program's processes: %s",
			strings.Join(p.e.Notes, "; "))
	}
	b := &Backend{opts: o, python: py, enf: p.e}
	base := o.WorkspaceBase
	if base == "" {
		base = os.TempDir()
	}
	b.base = filepath.Join(base, "mcp-sandbox-workspaces")
	if err := os.MkdirAll(b.base, 0o700); err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "preparing the workspace directory: %v", err)
	}
	return b, nil
}

// Name is "jobobject".
func (b *Backend) Name() string { return "jobobject" }

// Python is the interpreter the backend runs.
func (b *Backend) Python() string { return b.python }

// Enforcement is what Probe saw this platform enforce.
func (b *Backend) Enforcement() Enforcement { return b.enf }

// Mechanisms lists what this backend applies.
func (b *Backend) Mechanisms() []string {
	m := []string{"job-object", "kill-on-close", "restricted-token", "loopback-channel", "scrubbed-env", "ephemeral-workspace"}
	if b.enf.CPUMeter {
		m = append(m, "cpu-meter")
	}
	return m
}

// stub reads the bootstrap from stdin (its length is its first argument, which it removes)
// and runs it: the bootstrap is longer than a Windows command line may be. The token follows
// it on stdin, where the bootstrap reads it.
const stub = "import os, sys\nn = int(sys.argv.pop(1))\nsrc = b''\nwhile len(src) < n:\n" +
	"    chunk = os.read(0, n - len(src))\n    if not chunk:\n        os._exit(125)\n    src += chunk\n" +
	"exec(compile(src, '<string>', 'exec'))\n"

// Start launches one child: the interpreter, suspended, assigned to a job with the terms'
// limits, then resumed; it connects back to the channel's loopback listener with the token
// it reads from stdin after the bootstrap.
func (b *Backend) Start(ctx context.Context, spec engine.LaunchSpec) (engine.Child, error) {
	if len(spec.Command) > 0 {
		return nil, failure.New(failure.BackendUnavailable, "the jobobject backend does not run contained commands")
	}
	if len(spec.Argv) < 3 || spec.Argv[0] != "-I" || spec.Argv[1] != "-c" {
		return nil, failure.New(failure.Internal, "the jobobject backend runs the bootstrap only")
	}
	ws, err := os.MkdirTemp(b.base, "mcp-sandbox-ws-")
	if err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "creating the workspace failed")
	}
	c := &child{workspace: ws, waited: make(chan struct{}), closed: make(chan struct{}),
		facts: engine.Facts{HostUID: -1, RunAsUID: -1, Graded: b.enf.Grades(), Lacking: b.enf.Lacking()}}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	token := tokenconn.NewToken()
	if c.ch, err = listen(token); err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "opening the channel's loopback listener: %v", err)
	}
	env := spawn.Env(ws, b.opts.Env)
	keep := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		keep = append(keep, name)
	}
	source := spec.Argv[2]
	args := append([]string{"-I", "-c", stub, strconv.Itoa(len(source))}, spec.Argv[3:]...)
	args = append(args, "tcp:"+strconv.Itoa(c.ch.port()), strings.Join(keep, ","))
	cmd := exec.Command(b.python, args...)
	cmd.Env = env
	cmd.Dir = ws
	cmd.Stdin = strings.NewReader(source + token + "\n")
	if c.job, err = New(LimitsFor(spec.Terms.Limits)); err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "%v", err)
	}
	if err := c.start(cmd, spec.Stdout, spec.Stderr); err != nil {
		return nil, failure.Wrap(failure.BackendUnavailable, err, "%v", err)
	}
	go func() {
		c.Wait()
		c.ch.fail(errNoChild)
	}()
	if cpu := spec.Terms.Limits.CPUSeconds; cpu > 0 {
		c.meters.Add(1)
		go func() {
			defer c.meters.Done()
			c.job.meter(float64(engine.CPUHardRlimit(cpu)), c.closed)
		}()
	}
	ok = true
	return c, nil
}

// child is one started execution: the interpreter and whatever it starts, all in one job.
type child struct {
	workspace string
	facts     engine.Facts
	ch        *channel
	job       *Job

	cmd     *exec.Cmd
	out     spawn.Output
	meters  sync.WaitGroup
	waited  chan struct{}
	closed  chan struct{} // closed by Close: the meter stops
	exit    engine.Exit
	wait    sync.Once
	closing sync.Once
	tree    engine.TreeUsage // what Close found, set once by it
}

func (c *child) start(cmd *exec.Cmd, stdout, stderr io.Writer) error {
	closeWrites, err := c.out.Attach(cmd, stdout, stderr)
	defer closeWrites()
	if err != nil {
		return err
	}
	if err := c.job.Start(cmd, &StartOptions{RestrictedToken: true}); err != nil {
		return fmt.Errorf("starting the interpreter in its job: %w", err)
	}
	c.cmd = cmd
	return nil
}

func (c *child) Channel() io.ReadWriteCloser { return c.ch }
func (c *child) Facts() engine.Facts         { return c.facts }

func (c *child) Workspace() string {
	select {
	case <-c.waited:
		return ""
	default:
		return c.workspace
	}
}

// Wait waits for the interpreter. One the job ended for its CPU time (its own limit or the
// host's meter) is reported as the engine knows a CPU limit's end, by SIGXCPU.
func (c *child) Wait() engine.Exit {
	c.wait.Do(func() {
		defer close(c.waited)
		if c.cmd == nil {
			c.exit = engine.Exit{Code: -1, Err: fmt.Errorf("the child never started")}
			return
		}
		_ = c.cmd.Wait()
		st := c.cmd.ProcessState
		if st == nil {
			c.exit = engine.Exit{Code: -1, Err: fmt.Errorf("the child's state is unknown")}
			return
		}
		c.exit = engine.Exit{Code: st.ExitCode(), CPUSeconds: c.job.CPUSeconds()}
		if c.job.OverCPU() {
			c.exit.Code, c.exit.Signal = -1, "SIGXCPU"
		}
	})
	return c.exit
}

// Kill ends every process of the job.
func (c *child) Kill() {
	if c.job != nil {
		_ = c.job.Kill()
	}
}

// Close kills what is left, waits (bounded) for the job to be empty and for the output
// copies, and removes the workspace. A job still holding processes is reported escaped.
func (c *child) Close() engine.TreeUsage {
	c.closing.Do(func() {
		close(c.closed)
		c.Kill()
		if c.cmd != nil {
			// Start's goroutine is in Wait, which closes waited.
			select {
			case <-c.waited:
			case <-time.After(10 * time.Second):
			}
		}
		if c.job != nil {
			if !c.job.drained(10 * time.Second) {
				c.tree.Escaped = true
				c.tree.EscapedWhy = "the job still held processes after it was terminated"
			}
		}
		if c.ch != nil {
			c.ch.Close()
		}
		c.out.Close(2 * time.Second)
		c.meters.Wait()
		if c.job != nil {
			c.job.Close()
		}
		_ = os.RemoveAll(c.workspace)
	})
	return c.tree
}

// drained waits up to d for the job to hold no process, reading its count every 20 ms.
func (j *Job) drained(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if a, err := j.Account(); err == nil && a.ActiveProcesses == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-j.empty:
		case <-time.After(20 * time.Millisecond):
		}
	}
}
