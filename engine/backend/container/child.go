package container

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
)

const (
	// runtimeKillAfter is how long Kill lets the container end by itself (the channel closed,
	// its processes killed through the cgroup) before it runs the runtime's kill.
	runtimeKillAfter = 500 * time.Millisecond
	// exitBound bounds the wait, in Close, for the CLI to return once the container is killed.
	exitBound = 10 * time.Second
	// peerExitGrace bounds how long the end of the channel waits for the interpreter that
	// connected to be seen exiting: the channel closes as it exits, a moment before its exit
	// is visible from here on a busy host.
	peerExitGrace = 500 * time.Millisecond
)

// hostChannel is the host's end of one execution's channel: the token socket (channel) or the
// standard streams (streams).
type hostChannel interface {
	io.ReadWriteCloser
	// fail ends the wait for the child with err, once the CLI is reaped.
	fail(err error)
	connected() bool
	peer() int
	awaitPeerExit(stop <-chan struct{}) bool
	awaitPeerExitFor(d time.Duration, stop func() bool) bool
	peerExiting() bool
}

// execCgroup is the execution's cgroup on this host (internal/cgroup's Parent), which the
// runtime nests the container under: only an engine on this Linux host has one.
type execCgroup interface {
	Path() string
	PIDs() []int
	NoteOOM()
	OOMKills() int64
	CPUSeconds() float64
	End()
	Kill()
	Remove() error
}

// errNoChild reads as the end of the channel, which is what it is to the Runner.
var errNoChild = fmt.Errorf("the sandbox child exited before it connected: %w", io.EOF)

// child is one container: the `run` CLI process the host waits for, the channel, and what
// Close removes. Its methods are safe for concurrent use.
type child struct {
	b         *Backend
	name      string
	workspace string // inside the container
	uid, gid  int    // the execution's identity in the container
	execDir   string
	cmd       *exec.Cmd
	ch        hostChannel
	cg        execCgroup // nil when the runtime's flags carry the limits
	facts     engine.Facts
	release   func() // the identity lease

	waited  chan struct{} // closed once the CLI is reaped; cliExit is then set
	cliExit engine.Exit   // how the CLI said the container ended
	// exited is closed once exit is known: from the CLI, or, when the memory limit's OOM
	// killer ended the container, from the kernel's count without waiting for the CLI.
	exited   chan struct{}
	exitOnce sync.Once
	exit     engine.Exit

	cpuLimit  uint64         // RLIMIT_CPU's hard limit in the container
	killed    atomic.Bool    // Kill was called
	watch     sync.WaitGroup // the goroutine noting OOM kills when the interpreter exits
	killOnce  sync.Once
	killer    sync.WaitGroup // the runtime's kill, when Kill had to run it
	closeOnce sync.Once
	usage     engine.TreeUsage
	// engineOOM: the container was OOM-killed, as an engine in a VM, whose cgroups this host
	// cannot read, tells it (remoteOOM); set before waited is closed.
	engineOOM bool
	started   time.Time // when the CLI started
}

// start runs the CLI, hands it the token on stdin, and begins waiting for it.
func (c *child) start(args []string, env []string, token string, stdout, stderr io.Writer) error {
	c.waited, c.exited = make(chan struct{}), make(chan struct{})
	c.started = time.Now()
	c.cmd = exec.Command(c.b.rt.Path, args...)
	c.cmd.Env = env
	c.cmd.Stdout, c.cmd.Stderr = stdout, stderr
	// The CLI's output is the container's, copied by the CLI: once it exits nothing else
	// holds those pipes, but a bound costs nothing.
	c.cmd.WaitDelay = 2 * time.Second
	c.cmd.SysProcAttr = cliAttr()
	if st, ok := c.ch.(*streams); ok {
		// The channel is the CLI's stdin and stdout: the host's frames follow the token on
		// stdin, which stays open, and stdout carries the records (streams.go).
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		c.cmd.Stdin, c.cmd.Stdout = r, st.demux()
		err = c.cmd.Start()
		r.Close()
		if err != nil {
			w.Close()
			return fmt.Errorf("starting %s failed: %w", c.b.rt.Kind, err)
		}
		// A pipe holds far more than one line: this write does not wait for the container.
		_ = st.attach(w)
	} else {
		stdin, err := c.cmd.StdinPipe()
		if err != nil {
			return err
		}
		if err := c.cmd.Start(); err != nil {
			return fmt.Errorf("starting %s failed: %w", c.b.rt.Kind, err)
		}
		_, _ = io.WriteString(stdin, token+"\n")
		stdin.Close()
	}
	go c.wait()
	if c.cg != nil {
		// When the interpreter exits, the container's cgroup still holds the count of OOM
		// kills that the runtime removes with it a moment later.
		c.watch.Add(1)
		go func() {
			defer c.watch.Done()
			if c.ch.awaitPeerExit(c.waited) {
				c.cg.NoteOOM()
			}
		}()
	}
	return nil
}

// wait reaps the CLI and turns its status into the container's exit. The channel's reads end
// only once that exit is known: reading it can take the runtime's inspect, which a busy host
// delays past the Runner's grace for an exit after the channel's end, and a channel ended
// with no exit known and no interpreter this host can see reads as a child that closed it and
// kept running (docs/design.md §4.6).
func (c *child) wait() {
	x := c.reap()
	c.cliExit = x
	close(c.waited)
	c.settle(x)
	c.ch.fail(errNoChild)
}

// settle makes x the container's exit, unless an exit is known already.
func (c *child) settle(x engine.Exit) {
	c.exitOnce.Do(func() {
		c.exit = x
		close(c.exited)
	})
}

func (c *child) reap() engine.Exit {
	err := c.cmd.Wait()
	ps := c.cmd.ProcessState
	if ps == nil {
		return engine.Exit{Code: -1, Err: err}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		// The CLI itself was killed: how the container ended is unknown.
		return engine.Exit{Code: -1, Signal: ws.Signal().String()}
	}
	x := engine.Exit{Code: ps.ExitCode()}
	if c.cg != nil {
		x.CPUSeconds = c.cg.CPUSeconds()
	}
	switch code := x.Code; {
	case code >= 125 && code <= 127 && !c.ch.connected():
		// The runtime's own failures (125: the CLI, 126: the OCI runtime, 127: no such
		// interpreter in the image) before the child spoke: the sandbox was never set up.
		x.Code = 125
		c.explainSetupFailure()
	case code > 128 && code < 128+65:
		// The runtime reports a process killed by signal N (the container kernel's, Linux's)
		// as 128+N. An engine elsewhere keeps the container until its end is read here: how
		// the memory limit ended it is the engine's to say.
		x.Code, x.Signal = -1, engine.LinuxSignal(code-128)
		if c.cg == nil && c.b.rt.Remote && x.Signal == engine.LinuxSignal(linuxSIGKILL) && !c.killed.Load() {
			c.engineOOM = c.remoteOOM()
		}
		if c.killedByCPULimit(x) {
			x.CPUSeconds = max(x.CPUSeconds, float64(c.cpuLimit))
		}
	}
	return x
}

// killedByCPULimit: the interpreter is pid 1 of the container's pid namespace, which no
// process inside can SIGKILL. A SIGKILL the host did not send (Kill was not called) and the
// memory limit did not send (no OOM kill counted) is the kernel's, at RLIMIT_CPU's hard limit.
// The kernel counts that limit in scheduler ticks, which on a busy host run well ahead of the
// precise time the cgroup reports (1.6 s measured at a 2 s limit), so the CPU time reported
// is at least the limit the kernel enforced.
func (c *child) killedByCPULimit(x engine.Exit) bool {
	if x.Signal != engine.LinuxSignal(linuxSIGKILL) || c.killed.Load() {
		return false
	}
	switch {
	case c.cg != nil:
		return c.cg.OOMKills() == 0
	case c.b.rt.Remote:
		return !c.engineOOM
	}
	return false
}

// linuxSIGKILL is SIGKILL's number in the container's kernel.
const linuxSIGKILL = 9

// remoteOOM tells, for an engine elsewhere, whether the memory limit's OOM killer sent the
// SIGKILL that ended the container (which the host did not send): the engine counts OOM kills
// in cgroups this host cannot read, and says so in inspect where it can (Docker Desktop, a
// Podman machine on cgroup v2). Where it says no, the one other sender is RLIMIT_CPU's hard
// limit; but not every engine says yes (podman on cgroup v1 does not), so a kill that came
// before the interpreter could have used its CPU limit (the time the container ran, on every
// CPU the engine has) is the OOM killer's whatever the engine said. Only a kill after that,
// which the engine did not call an OOM kill, is read as the CPU limit's.
func (c *child) remoteOOM() bool {
	ran := time.Since(c.started).Seconds()
	if ran*float64(max(c.b.rt.CPUs, 1)) < float64(c.cpuLimit) {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	out, err := cli(ctx, c.b.rt.Path, "inspect", "--format", "{{.State.OOMKilled}}", c.name)
	return err == nil && out == "true"
}

// explainSetupFailure adds, as the last line of stderr (the one a setup failure's message
// quotes), what to run when the failure was a missing image: the runtime says only that it
// does not know it, and --pull=never kept it from fetching anything.
func (c *child) explainSetupFailure() {
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	if present, err := imagePresent(ctx, c.b.rt, c.b.opts.Image); err == nil && !present && c.cmd.Stderr != nil {
		_, _ = io.WriteString(c.cmd.Stderr, "mcp-sandbox-init: "+ImageGuidance(c.b.rt, c.b.opts.Image)+"\n")
	}
}

func (c *child) Channel() io.ReadWriteCloser { return c.ch }
func (c *child) Facts() engine.Facts         { return c.facts }

func (c *child) Wait() engine.Exit {
	<-c.exited
	return c.exit
}

// Workspace is the workspace through the container's root as the host sees it, while the
// interpreter that connected lives; "" when its pid is not visible from here.
func (c *child) Workspace() string {
	pid := c.ch.peer()
	if pid <= 0 {
		return ""
	}
	return fmt.Sprintf("/proc/%d/root%s", pid, c.workspace)
}

// settleExit runs when the channel ends, before the Runner sees that end. If the interpreter
// that connected has exited (or does within peerExitGrace), the end of the channel is reported
// only once its exit is known, which the runtime reports a moment after the container dies
// (podman's monitor, then the removal). Otherwise a Runner would take a child killed at a
// limit for one that closed its channel and kept running. An interpreter still alive closed
// its channel itself: that is reported after the grace.
//
// The memory limit's OOM kills are read first, while the container's cgroups still exist:
// when the kernel's OOM killer ended any process of the container, the exit is known at once
// (killed, at the memory limit), without waiting for the runtime's report, which a runtime
// whose monitor shared that limit, or a busy host, can delay past any bound.
// With the interpreter gone the execution is over: the container's processes are killed and
// its memory limit lifted, so that none is held exiting by a limit full of its own files.
func (c *child) settleExit() {
	oom := func() bool { return c.cg != nil && c.cg.OOMKills() > 0 }
	exited := c.ch.awaitPeerExitFor(peerExitGrace, oom)
	oomKilled := oom()
	if !exited && !oomKilled {
		return
	}
	if c.cg != nil {
		c.cg.End()
	}
	if oomKilled {
		c.settle(engine.Exit{Code: -1, Signal: engine.LinuxSignal(linuxSIGKILL), CPUSeconds: c.cg.CPUSeconds()})
		return
	}
	select {
	case <-c.exited:
	case <-time.After(exitBound):
	}
}

// InterpreterEnded reports whether the interpreter that connected has exited or is exiting:
// its exit then comes once the runtime reports it (docs/design.md §4.6).
func (c *child) InterpreterEnded() bool { return c.ch.peerExiting() }

// Kill ends the container: the channel closes (the bootstrap exits on its end), the
// container's processes are killed through the execution's cgroup, and if the container has
// not ended within a moment the runtime's kill runs. It is idempotent.
func (c *child) Kill() {
	c.killed.Store(true)
	c.ch.Close()
	if c.cg != nil {
		c.cg.End()
		c.cg.Kill()
	}
	c.killOnce.Do(func() {
		c.killer.Add(1)
		go func() {
			defer c.killer.Done()
			select {
			case <-c.waited:
				return
			case <-time.After(runtimeKillAfter):
			}
			ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
			defer cancel()
			_, _ = cli(ctx, c.b.rt.Path, "kill", "--signal", "KILL", c.name)
		}()
	})
}

// Close kills what is left, waits for the CLI (bounded), removes the container if `run
// --rm` could not, then the socket directory and the cgroup, and releases the identity.
// It is idempotent.
func (c *child) Close() engine.TreeUsage {
	c.closeOnce.Do(func() {
		if c.cmd != nil && c.cmd.Process != nil {
			c.Kill()
			select {
			case <-c.waited:
			case <-time.After(exitBound):
				_ = c.cmd.Process.Kill()
				<-c.waited
			}
			c.killer.Wait()
			c.watch.Wait()
			// `run --rm` removed the container unless the CLI was killed or failed itself; an
			// engine elsewhere ran it without --rm, so that its end could be read first.
			if ps := c.cmd.ProcessState; ps == nil || !ps.Exited() || c.cliExit.Code == 125 || c.b.rt.Remote {
				ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
				_, _ = cli(ctx, c.b.rt.Path, append(rmArgs(c.b.rt), c.name)...)
				cancel()
			}
		}
		if c.ch != nil {
			c.ch.Close()
		}
		c.usage.OOMKilled = c.engineOOM
		if c.cg != nil {
			c.usage.OOMKilled = c.cg.OOMKills() > 0
			if err := c.cg.Remove(); err != nil {
				slog.Warn("container backend: an execution's cgroup could not be removed; the next start's sweep retries", "err", err)
			}
		}
		if c.execDir != "" {
			os.RemoveAll(c.execDir)
		}
		if c.release != nil {
			c.release()
		}
		c.b.executions.Done()
	})
	return c.usage
}
