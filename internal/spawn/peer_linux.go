//go:build linux

package spawn

import (
	"bytes"
	"errors"
	"io/fs"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Peer is a process at the child's end of a channel that the host did not start itself but
// learned the pid of: the interpreter, from the kernel's credentials on the first bytes it sent
// (Conn), or a socket's peer credentials. It holds a pidfd of it, so that the pid cannot come
// to name another process unnoticed. The zero Peer knows no process. Its methods are safe for
// concurrent use; none blocks while holding mu (docs/design.md §4.6).
type Peer struct {
	mu    sync.Mutex
	pid   int      // in this process's pid namespace; 0 when unknown or not visible from here
	pidfd *os.File // a pidfd of pid; nil when none could be opened
	gone  bool     // the pidfd could not be opened because pid had been reaped already
}

// Set records pid, once: later calls do nothing.
func (p *Peer) Set(pid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pid > 0 || pid <= 0 {
		return
	}
	p.pid = pid
	fd, err := unix.PidfdOpen(pid, 0)
	switch {
	case err == nil:
		p.pidfd = os.NewFile(uintptr(fd), "pidfd")
	case err == unix.ESRCH:
		p.gone = true
	}
}

// Pid is the process's pid in this process's pid namespace, 0 when unknown.
func (p *Peer) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid
}

// Exiting reports whether the process has exited or is on its way out (Exiting's rule, below):
// its exit status is then on its way, however long a busy host takes to schedule whatever
// must reap and report it. Without the process's pid nothing is known, and it reports false.
func (p *Peer) Exiting() bool {
	p.mu.Lock()
	defer p.mu.Unlock() // nothing below waits
	if p.pid <= 0 {
		return false
	}
	if p.gone {
		return true
	}
	if p.pidfd == nil {
		return Exiting(p.pid)
	}
	return ExitingPidfd(p.pid, int(p.pidfd.Fd()))
}

// ExitingPidfd is Exiting for a process the caller holds a pidfd of: /proc is read first, and
// a pidfd not readable after it says the process had not exited, so had not been reaped, and
// pid still named it while it was read.
func ExitingPidfd(pid, pidfd int) bool {
	ending := Exiting(pid)
	return readable(pidfd) || ending
}

// AwaitExit blocks until the process has exited (its pidfd is readable), or stop is closed,
// or ready is closed without a process known; it reports whether the process exited. ready
// is closed once the process is known or never will be. It polls a descriptor of its own.
func (p *Peer) AwaitExit(ready, stop <-chan struct{}) bool {
	select {
	case <-ready:
	case <-stop:
		return false
	}
	p.mu.Lock()
	fd := -1
	if p.pidfd != nil {
		fd, _ = unix.FcntlInt(p.pidfd.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	}
	p.mu.Unlock()
	if fd < 0 {
		return false
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		if n, err := unix.Poll(fds, 50); err == nil && n == 1 && fds[0].Revents&unix.POLLIN != 0 {
			return true
		}
		select {
		case <-stop:
			return false
		default:
		}
	}
}

// AwaitExitFor waits up to d for the process to be exiting, returning early when stop
// reports true; it reports whether the process is exiting.
func (p *Peer) AwaitExitFor(d time.Duration, stop func() bool) bool {
	if p.Pid() <= 0 {
		return false // not visible from here: nothing to wait for
	}
	deadline := time.Now().Add(d)
	for {
		if p.Exiting() {
			return true
		}
		if stop() || !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Close closes the pidfd. It is idempotent.
func (p *Peer) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pidfd != nil {
		p.pidfd.Close()
		p.pidfd = nil
	}
}

// readable reports whether fd polls readable now: for a pidfd, that its process has exited.
func readable(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n == 1 && fds[0].Revents&unix.POLLIN != 0
}

// pfExiting is the kernel's PF_EXITING, which /proc shows in a thread's flags.
const pfExiting = 0x4

// sigkillBit is SIGKILL's bit in /proc's masks of pending signals.
const sigkillBit = 1 << (unix.SIGKILL - 1)

// Exiting reads /proc for whether process pid has ended or is ending: each of its threads a
// zombie, inside the kernel's exit (PF_EXITING, which the kernel sets as an exit begins,
// before it closes the process's descriptors: a channel that ended because its process exited
// finds it set), or holding a pending SIGKILL, which nothing escapes; a pid /proc no longer
// lists was reaped. A process that closed its channel and runs on has a thread that is none
// of these. The caller makes sure pid still names the process it means (Peer holds a pidfd;
// a parent that has not reaped it knows).
func Exiting(pid int) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	d, err := os.Open(dir)
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	tids, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return false
	}
	for _, tid := range tids {
		if !threadExiting(dir + tid) {
			return false
		}
	}
	return true
}

// threadExiting is Exiting's rule for one thread, whose /proc directory is dir.
func threadExiting(dir string) bool {
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	// tid (comm) state ppid pgrp session tty_nr tpgid flags ...: comm may hold anything, so
	// the fields are read after its last ')'.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 7 {
		return false
	}
	if f[0] == "Z" || f[0] == "X" || f[0] == "x" {
		return true
	}
	if flags, err := strconv.ParseUint(f[6], 10, 64); err == nil && flags&pfExiting != 0 {
		return true
	}
	status, err := os.ReadFile(dir + "/status")
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	for _, line := range strings.Split(string(status), "\n") {
		name, v, ok := strings.Cut(line, ":")
		if !ok || name != "SigPnd" && name != "ShdPnd" {
			continue
		}
		if mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && mask&sigkillBit != 0 {
			return true
		}
	}
	return false
}

// channelConn is the host's end of a child's channel that learns which process sent the
// first bytes on it: the kernel attaches their sender's credentials (SO_PASSCRED, set before
// the child had the channel, so no process can send without them), and the first sender is
// the interpreter, whose bootstrap says hello before any program byte runs. Only the frame
// reader reads it; every other method is the Unix connection's.
type channelConn struct {
	*net.UnixConn
	speaker *Peer
	heard   atomic.Bool
}

// passCredentials has the kernel attach its sender's credentials to every message that
// reaches socket fd (SO_PASSCRED).
func passCredentials(fd int) error {
	return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PASSCRED, 1)
}

func (c *channelConn) Read(b []byte) (int, error) {
	if c.heard.Load() {
		return c.UnixConn.Read(b)
	}
	oob := make([]byte, unix.CmsgSpace(unix.SizeofUcred))
	n, oobn, _, _, err := c.ReadMsgUnix(b, oob)
	if n > 0 {
		c.heard.Store(true)
		if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
			for i := range msgs {
				if cred, perr := unix.ParseUnixCredentials(&msgs[i]); perr == nil {
					c.speaker.Set(int(cred.Pid))
				}
			}
		}
	}
	return n, err
}
