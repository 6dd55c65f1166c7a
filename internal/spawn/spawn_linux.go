//go:build linux

package spawn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/cgroup"
	"github.com/mcp-sandbox/mcp-sandbox/internal/launch"
	"github.com/mcp-sandbox/mcp-sandbox/internal/launch/seccomp"
	"golang.org/x/sys/unix"
)

// Exit is how the helper's main process ended; it converts to engine.Exit.
type Exit struct {
	Code       int // -1 when killed by a signal
	Signal     string
	CPUSeconds float64
	// RlimitCPUSeconds is the interpreter's CPU time as RLIMIT_CPU counts it
	// (launch.RlimitCPUSeconds); 0 when unknown.
	RlimitCPUSeconds float64
	Err              error
}

// Usage is what a cgroup observed over the tree, and whether a subreaper saw the tree die;
// it converts to engine.TreeUsage.
type Usage struct {
	OOMKilled    bool
	PIDsLimitHit bool
	// Escaped: the helper was a Subreaper that did not report its tree empty (the program
	// killed it, or it had to be killed), or SIGKILL did not reach the main process
	// (AwaitKilled: the kernel refused it): processes of the tree may have outlived the
	// execution.
	Escaped bool
	// EscapedWhy says why when the host knows (a refused SIGKILL); "" otherwise.
	EscapedWhy string
}

// subreaperGrace is how long Close waits for a Subreaper to empty its tree after Kill before
// it kills the subreaper itself (and reports Escaped).
const subreaperGrace = 3 * time.Second

// KillGrace is how long Close waits for the main process after Kill before it looks at it: a
// process SIGKILL reached is gone in milliseconds on an idle host, and one still there that
// the kernel is not taking down (Exiting) was never reached (a root host without CAP_KILL, the
// program under another uid). Close then reports the tree Escaped rather than wait for a
// process that may never end (AwaitKilled).
const KillGrace = 3 * time.Second

// exitingBound bounds the wait for a process the kernel is taking down to be gone: one not
// gone after it is stuck inside the kernel.
const exitingBound = time.Minute

// AwaitKilled waits for ended, closed once the process pid is gone, after a kill: grace at
// first; then, as long as the kernel is taking the process down (Exiting: its SIGKILL pending,
// or its exit begun, where a pid namespace's init waits for every process of its namespace to
// die), up to exitingBound, since on a busy host a dying process waits to be scheduled like any
// other. It reports whether ended closed: false says the kill never reached the process. The
// caller makes sure pid names the process until ended closes (its parent, or the holder of a
// pidfd whose readability closes ended).
func AwaitKilled(ended <-chan struct{}, pid int, grace time.Duration) bool {
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-ended:
		return true
	case <-t.C:
	}
	// A dying thread shows none of Exiting's marks for an instant (its SIGKILL dequeued, its
	// exit not yet begun): it reads as not dying only when read so twice in a row.
	limit := time.Now().Add(exitingBound)
	for alive := 0; alive < 2 && time.Now().Before(limit); {
		if Exiting(pid) {
			alive = 0
		} else {
			alive++
		}
		t.Reset(20 * time.Millisecond)
		select {
		case <-ended:
			return true
		case <-t.C:
		}
	}
	select {
	case <-ended:
		return true
	default:
		return false
	}
}

// Proc is one started (or about to be started) child. Set the exported fields before Start;
// Close undoes them even when Start was never called or failed.
type Proc struct {
	// Group, when set, is killed with the tree, read for its events and removed on Close.
	Group *cgroup.Group
	// KillUID, when positive, is an identity exclusive to this execution: Kill kills every
	// process it owns through a helper.
	KillUID int
	// Status: the helper is a reaping init (launch.Spec.Reaper) that reports the program's
	// wait status on launch.StatusFD; Wait prefers that report to the helper's own status.
	Status bool
	// Interpreter: the helper's main process becomes the interpreter itself (it execs it), so
	// Wait reads its CPU time as RLIMIT_CPU counts it before reaping it. Not for a helper that
	// execs a wrapper (bwrap), whose clock is the wrapper's.
	Interpreter bool
	// Subreaper: the helper is that init without a pid namespace (launch.Spec.Subreaper), so
	// it must not die before the tree: Kill asks it (SIGTERM, and SIGCONT should the program
	// have stopped it) rather than killing it, and Close kills it only after subreaperGrace.
	Subreaper bool
	// MapIDs, when set, writes the uid and gid maps of the user namespace the helper starts
	// in (for subordinate ids, through newuidmap and newgidmap); the helper waits for it
	// (launch.Spec.IDMapFD) before anything else, and Start fails when it fails.
	MapIDs func(pid int) error
	// Unkillable: the backend knows that nothing it has can kill the tree (engine.Facts
	// Unkillable); Close's report of a tree that outlived it says why.
	Unkillable bool
	// Egress: the helper is a Reaper in a network namespace of its own that sends back a
	// listener on 127.0.0.1:EgressPort there (launch.Spec.EgressFD); ReceiveEgress takes it.
	Egress bool
	// EgressPort is that listener's port.
	EgressPort int
	// Cleanup runs last in Close (remove the workspace, release an identity lease).
	Cleanup []func()

	cmd      *exec.Cmd
	conn     net.Conn
	speaker  Peer // the interpreter, once its first bytes on the channel named it
	initPath string

	status  *os.File
	egress  *os.File     // the host's end of the socket the egress listener comes on
	egressL net.Listener // the listener, once received
	copies  sync.WaitGroup
	copying atomic.Int32  // output copies still running
	copied  chan struct{} // closed when both have ended: every writer let go of the streams
	readEnd []*os.File

	waitOnce sync.Once
	exit     Exit
	escaped  bool // set by Wait
	waited   chan struct{}
	refused  atomic.Bool // the kernel refused Kill's SIGKILL to the main process (EPERM)

	closeOnce sync.Once
	usage     Usage
}

// Start runs the init helper at initPath with spec; attr adds to the SysProcAttr (namespace
// flags, uid maps). The helper always gets its own session and SIGKILL on the host's death.
func (p *Proc) Start(initPath string, spec *launch.Spec, attr *syscall.SysProcAttr, stdout, stderr io.Writer) error {
	// The helper installs the policy compiled here (once per variant for the server's life),
	// never one a caller put in spec.
	var filter []byte
	if spec.Seccomp || spec.DenyInet {
		var err error
		if filter, err = seccomp.Filter(spec.DenyInet, spec.Template); err != nil {
			return err
		}
	}
	p.initPath = initPath
	p.waited = make(chan struct{})
	p.copied = make(chan struct{})
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socketpair failed: %w", err)
	}
	hostEnd := os.NewFile(uintptr(fds[0]), "channel")
	childEnd := os.NewFile(uintptr(fds[1]), "channel-child")
	defer childEnd.Close()
	// A program's channel names its interpreter to the host (channelConn); a template's
	// carries descriptors, whose control messages must come alone.
	speaks := !spec.Template
	if speaks {
		if err := passCredentials(fds[0]); err != nil {
			hostEnd.Close()
			return fmt.Errorf("channel setup failed: %w", err)
		}
	}
	conn, err := net.FileConn(hostEnd)
	hostEnd.Close()
	if err != nil {
		return fmt.Errorf("channel setup failed: %w", err)
	}
	p.conn = conn
	if uc, ok := conn.(*net.UnixConn); ok && speaks {
		p.conn = &channelConn{UnixConn: uc, speaker: &p.speaker}
	}
	copied := *spec
	spec = &copied // the descriptors below are the helper's to know, not the caller's
	spec.Filter = filter
	cmd := exec.Command(initPath, launch.Command)
	cmd.ExtraFiles = []*os.File{childEnd}
	if p.Status {
		r, w, err := os.Pipe()
		if err != nil {
			return fmt.Errorf("pipe failed: %w", err)
		}
		defer w.Close()
		p.status = r
		cmd.ExtraFiles = append(cmd.ExtraFiles, w) // fd 4 = launch.StatusFD
	}
	if p.Egress {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("socketpair failed: %w", err)
		}
		p.egress = os.NewFile(uintptr(fds[0]), "egress")
		child := os.NewFile(uintptr(fds[1]), "egress-child")
		defer child.Close()
		cmd.ExtraFiles = append(cmd.ExtraFiles, child)
		spec.EgressFD, spec.EgressPort = 2+len(cmd.ExtraFiles), p.EgressPort
	}
	var mapped *os.File // the host's end of the id-map signal
	if p.MapIDs != nil {
		fd, w, closeBoth, err := parentSignal(cmd)
		if err != nil {
			return err
		}
		defer closeBoth()
		mapped, spec.IDMapFD = w, fd
	}
	if attr == nil {
		attr = &syscall.SysProcAttr{}
	}
	// A helper that is itself the program's first process, or its parent (a Reaper that
	// execs the program itself), is started inside its cgroup (v2); any other Reaper starts
	// its own first process inside. On v1 whichever of them forks or becomes the program's
	// first process joins the thread that does so, through the group's tasks files opened
	// here (Spec.CgroupTasksFDs): no write of a pid, whose kernel lock waits a grace period.
	inside := !spec.Reaper || spec.ExecsProgram
	if spec.CgroupClone && inside {
		fd, err := launch.CgroupDir(spec.CgroupProcs)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		attr.UseCgroupFD, attr.CgroupFD = true, fd
	} else if !spec.CgroupClone {
		for _, procs := range spec.CgroupProcs {
			tasks := filepath.Join(filepath.Dir(procs), "tasks")
			f, err := os.OpenFile(tasks, os.O_WRONLY, 0)
			if err != nil {
				return fmt.Errorf("opening the execution's cgroup: %w", err)
			}
			defer f.Close()
			cmd.ExtraFiles = append(cmd.ExtraFiles, f)
			spec.CgroupTasksFDs = append(spec.CgroupTasksFDs, 2+len(cmd.ExtraFiles))
		}
	}
	cmd.Env = spec.Environ()
	attr.Setsid = true
	attr.Pdeathsig = syscall.SIGKILL
	cmd.SysProcAttr = attr
	var writeEnds []*os.File
	for _, sink := range []io.Writer{stdout, stderr} {
		r, w, err := os.Pipe()
		if err != nil {
			for _, w := range writeEnds {
				w.Close()
			}
			return fmt.Errorf("pipe failed: %w", err)
		}
		p.readEnd = append(p.readEnd, r)
		writeEnds = append(writeEnds, w)
		p.copies.Add(1)
		p.copying.Add(1)
		go func(sink io.Writer, r *os.File) {
			defer p.copies.Done()
			_, _ = io.Copy(sink, r)
			if p.copying.Add(-1) == 0 {
				close(p.copied)
			}
		}(sink, r)
	}
	cmd.Stdout, cmd.Stderr = writeEnds[0], writeEnds[1]
	err = cmd.Start()
	for _, w := range writeEnds {
		w.Close()
	}
	if err != nil {
		return fmt.Errorf("starting the init helper failed: %w", err)
	}
	p.cmd = cmd
	if mapped != nil {
		if err := p.MapIDs(cmd.Process.Pid); err != nil {
			return fmt.Errorf("mapping the sandbox's ids: %w", err) // Close kills the waiting helper
		}
		if err := letGo(mapped); err != nil {
			return err
		}
	}
	return nil
}

// parentSignal gives cmd a descriptor the helper reads one byte from before it goes on (the
// host's step done: the user namespace's ids mapped): the helper's fd number for it, the
// host's end to say go on (letGo), and what closes both of the host's copies.
func parentSignal(cmd *exec.Cmd) (fd int, w *os.File, closeBoth func(), err error) {
	r, w, err := os.Pipe()
	if err != nil {
		return 0, nil, nil, fmt.Errorf("pipe failed: %w", err)
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, r)
	return 2 + len(cmd.ExtraFiles), w, func() { r.Close(); w.Close() }, nil
}

// letGo tells the helper waiting on w (parentSignal) to go on.
func letGo(w *os.File) error {
	if _, err := w.Write([]byte{1}); err != nil {
		return fmt.Errorf("releasing the init helper: %w", err)
	}
	return nil
}

// ReceiveEgress waits for the listener the helper sends (Egress) and keeps it: the helper
// sends it before it starts the program, and an end of file means it failed first. It
// returns early with ctx's error.
func (p *Proc) ReceiveEgress(ctx context.Context) error {
	if p.egress == nil {
		return errors.New("no egress socket")
	}
	c, err := net.FileConn(p.egress)
	if err != nil {
		return err
	}
	defer c.Close()
	uc := c.(*net.UnixConn)
	stop := context.AfterFunc(ctx, func() { _ = uc.SetReadDeadline(time.Now()) })
	defer stop()
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("receiving the egress listener: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return fmt.Errorf("the init helper sent no egress listener (%v)", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return fmt.Errorf("the init helper sent no egress listener (%v)", err)
	}
	f := os.NewFile(uintptr(fds[0]), "egress-listener")
	defer f.Close()
	l, err := net.FileListener(f)
	if err != nil {
		return fmt.Errorf("the egress listener: %w", err)
	}
	p.egressL = l
	return nil
}

// EgressListener is the listener ReceiveEgress received, or nil; Close closes it.
func (p *Proc) EgressListener() net.Listener { return p.egressL }

// OutputClosed is closed once both output streams have reached their end: no process holds
// their write ends any more, so every byte written is in the sinks.
func (p *Proc) OutputClosed() <-chan struct{} { return p.copied }

// Conn is the host's end of the channel.
func (p *Proc) Conn() net.Conn { return p.conn }

// InterpreterEnded reports whether the interpreter, the process that sent the channel's first
// bytes, has exited or is exiting (Exiting). Once the channel has ended, its exit status is
// then on its way through whatever must still reap and report it (the helper's init, bwrap),
// however long a busy host takes to schedule that (docs/design.md §4.6).
func (p *Proc) InterpreterEnded() bool { return p.speaker.Exiting() }

// Pid is the host pid of the helper's process (by then the interpreter, or the reaping init),
// or 0 before Start.
func (p *Proc) Pid() int {
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Wait blocks until the helper's main process (by then the interpreter) has exited.
func (p *Proc) Wait() Exit {
	p.waitOnce.Do(func() {
		defer close(p.waited)
		var rlimitCPU float64
		if p.Interpreter {
			rlimitCPU, _ = launch.ExitedCPU(p.cmd.Process.Pid)
		}
		err := p.cmd.Wait()
		ps := p.cmd.ProcessState
		if ps == nil {
			p.exit = Exit{Code: -1, Err: err}
			return
		}
		p.exit = Exit{Code: ps.ExitCode(), CPUSeconds: (ps.UserTime() + ps.SystemTime()).Seconds(), RlimitCPUSeconds: rlimitCPU}
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.exit.Signal = ws.Signal().String()
		}
		if p.status != nil {
			// The reaper has exited, so its write end is closed: this read cannot block.
			b, _ := io.ReadAll(io.LimitReader(p.status, 4096))
			var st launch.Status
			if json.Unmarshal(b, &st) == nil && len(b) > 0 {
				p.exit = Exit{Code: st.Code, CPUSeconds: st.CPUSeconds, RlimitCPUSeconds: st.RlimitCPU}
				if st.Signal != 0 {
					p.exit.Signal = syscall.Signal(st.Signal).String()
				}
			}
			p.escaped = p.Subreaper && !st.Emptied
		}
	})
	<-p.waited
	return p.exit
}

// Kill kills the whole tree: the main process (for a pid namespace's init, the namespace),
// its process group, the cgroup, and, where neither a cgroup nor a pid namespace holds the
// tree, an exclusive uid. A Subreaper is asked to kill its tree instead: killed first, it
// would hand that tree to the host's own parent. It signals and returns: Wait sees the main
// process go, and Close makes sure nothing of the tree is left.
func (p *Proc) Kill() {
	switch {
	case p.cmd == nil || p.cmd.Process == nil:
	case p.Subreaper:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
	default:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL); err == syscall.EPERM && p.refused.CompareAndSwap(false, true) {
			slog.Warn("the kernel refused SIGKILL to a sandbox's process: the server lacks CAP_KILL, which signalling "+
				"the sandbox identity's processes needs; the execution's tree may outlive it", "pid", p.cmd.Process.Pid)
		}
	}
	if p.Group != nil {
		p.Group.Signal()
	}
	// Every process of the tree is in the cgroup, or in the pid namespace whose init was just
	// killed, and none can leave either: the kill by uid (a helper started for it) would
	// find nothing more.
	if p.Group == nil && !p.Status {
		p.killByUID()
	}
}

// killByUID kills every process of an exclusive KillUID through a helper that becomes that
// uid, so no capability is needed to signal them (CAP_SETUID to become it).
func (p *Proc) killByUID() {
	if p.KillUID > 0 && p.initPath != "" {
		killer := exec.Command(p.initPath, launch.Command)
		killer.Env = launch.Spec{KillUID: p.KillUID}.Environ()
		_ = killer.Run()
	}
}

// waitOrKill waits for the helper, after Kill, and says whether it saw it end. A Subreaper
// gets subreaperGrace to empty its tree before it is killed too (it runs as the host's uid,
// so that kill is never refused). Any other main process gets KillGrace, and longer while the
// kernel takes it down (AwaitKilled): one still there and not dying was not reached by
// SIGKILL, and waiting longer could be waiting forever (Wait goes on in its own goroutine,
// which returns when the process ends, if ever). When the kernel refused
// the SIGKILL, the channel is closed first, so a program that cooperates ends on its own.
func (p *Proc) waitOrKill() bool {
	done := make(chan struct{})
	go func() { p.Wait(); close(done) }()
	if !p.Subreaper {
		grace := KillGrace
		if p.refused.Load() {
			// SIGKILL never left: the program can only end by itself, which a running one
			// does when its channel ends (the bootstrap's SIGIO). End it now, and wait less.
			if p.conn != nil {
				p.conn.Close()
			}
			grace = time.Second
		}
		return AwaitKilled(done, p.cmd.Process.Pid, grace)
	}
	select {
	case <-done:
	case <-time.After(subreaperGrace):
		_ = p.cmd.Process.Kill()
		<-done
	}
	return true
}

// escapedWhy is the reason Close gives for a tree that outlived it, when it knows one.
func (p *Proc) escapedWhy(mainAlive bool) string {
	switch {
	case p.refused.Load() || mainAlive && p.Unkillable:
		return "the kernel refused the host's SIGKILL to the program (the server lacks CAP_KILL, which signalling " +
			"the sandbox identity's processes needs), and the program was still running after it"
	case mainAlive:
		return "the program was still running " + KillGrace.String() + " after SIGKILL"
	case p.Unkillable:
		return "the sandbox's init could not kill the program's processes (the server lacks CAP_KILL, which " +
			"signalling the sandbox identity's processes needs)"
	}
	return ""
}

// Close kills what is left, drains the output (bounded), reads and removes the cgroup and
// runs Cleanup. It is idempotent.
func (p *Proc) Close() Usage {
	p.closeOnce.Do(func() {
		ended := true
		if p.cmd != nil {
			p.Kill()
			if ended = p.waitOrKill(); !ended && p.KillUID > 0 {
				// SIGKILL did not reach the tree; an exclusive uid can still be killed as itself.
				p.killByUID()
				select {
				case <-p.waited:
					ended = true
				case <-time.After(time.Second):
				}
			}
		}
		drained := make(chan struct{})
		go func() { p.copies.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-time.After(2 * time.Second):
			// Something outside our reach still holds a pipe: stop reading it.
			for _, r := range p.readEnd {
				r.Close()
			}
			<-drained
		}
		for _, r := range p.readEnd {
			r.Close()
		}
		if p.egressL != nil {
			p.egressL.Close()
		}
		if p.egress != nil {
			p.egress.Close()
		}
		if p.conn != nil {
			p.conn.Close()
		}
		p.speaker.Close()
		if p.status != nil {
			p.status.Close()
		}
		if ended {
			p.usage.Escaped = p.escaped
		} else {
			p.usage.Escaped = true
		}
		if p.usage.Escaped {
			p.usage.EscapedWhy = p.escapedWhy(!ended)
		}
		if p.Group != nil {
			ev := p.Group.Events()
			p.usage.OOMKilled, p.usage.PIDsLimitHit = ev.OOMKills > 0, ev.PIDsMax > 0
			_ = p.Group.Remove()
		}
		for _, f := range p.Cleanup {
			f()
		}
	})
	return p.usage
}
