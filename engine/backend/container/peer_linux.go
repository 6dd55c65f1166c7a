//go:build linux

package container

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// peerProcess is the interpreter at the child's end of a channel, once the host knows its pid
// (the socket's peer credentials, or the container's cgroup when the channel is the standard
// streams). Its methods are safe for concurrent use; none blocks while holding mu.
type peerProcess struct {
	mu    sync.Mutex
	pid   int // in this process's pid namespace; 0 when unknown or not visible from here
	pidfd int // a pidfd of pid, -1 when none
}

func newPeerProcess() peerProcess { return peerProcess{pidfd: -1} }

// set records pid, once: later calls do nothing.
func (p *peerProcess) set(pid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pid > 0 || pid <= 0 {
		return
	}
	p.pid = pid
	if fd, err := unix.PidfdOpen(pid, 0); err == nil {
		p.pidfd = fd
	}
}

func (p *peerProcess) get() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid
}

// awaitExit blocks until the peer has exited (its pidfd is readable), or stop is closed, or
// ready is closed without a peer; it reports whether the peer exited. ready is closed once
// the peer is known or never will be. It polls a descriptor of its own.
func (p *peerProcess) awaitExit(ready, stop <-chan struct{}) bool {
	select {
	case <-ready:
	case <-stop:
		return false
	}
	p.mu.Lock()
	fd := -1
	if p.pidfd >= 0 {
		fd, _ = unix.FcntlInt(uintptr(p.pidfd), unix.F_DUPFD_CLOEXEC, 0)
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

// awaitExitFor waits up to d for the peer to be exiting (exited), returning early when stop
// reports true; it reports whether the peer is exiting.
func (p *peerProcess) awaitExitFor(d time.Duration, stop func() bool) bool {
	if p.get() <= 0 {
		return false // not visible from here: nothing to wait for
	}
	deadline := time.Now().Add(d)
	for {
		if p.exited() {
			return true
		}
		if stop() || !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// exited reports whether the peer has exited or is exiting. A dying process frees its memory
// before it closes its files, and is reported exited (its pidfd readable) only after both: so
// when the channel ends, a peer whose memory is gone is on its way out, and one that still has
// it closed the channel itself. Without the peer's pid nothing is known, and it reports false.
func (p *peerProcess) exited() bool {
	p.mu.Lock()
	defer p.mu.Unlock() // nothing below waits
	if p.pid <= 0 {
		return false
	}
	if p.pidfd >= 0 {
		fds := []unix.PollFd{{Fd: int32(p.pidfd), Events: unix.POLLIN}}
		if n, err := unix.Poll(fds, 0); err == nil && n == 1 && fds[0].Revents&unix.POLLIN != 0 {
			return true
		}
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid))
	return err != nil || !bytes.Contains(status, []byte("\nVmSize:"))
}

// close closes the pidfd. It is idempotent.
func (p *peerProcess) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pidfd >= 0 {
		unix.Close(p.pidfd)
		p.pidfd = -1
	}
}
