//go:build linux

package claudecode

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/mcp-sandbox/mcp-sandbox/internal/launch"
)

// inLoopbackNetns runs f on an OS thread of its own in a new network namespace with only
// loopback up: the sockets f opens and the processes it starts (on that thread: exec.Cmd forks
// from the calling thread) are in the namespace, and so is everything they start. The thread
// is never handed back: it ends with f's goroutine, which stays locked to it.
func inLoopbackNetns(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- netnsError{fmt.Sprintf("unshare(CLONE_NEWNET): %v (a network namespace needs root)", err)}
			return
		}
		if err := launch.LoopbackUp(); err != nil {
			errc <- netnsError{err.Error()}
			return
		}
		errc <- f()
	}()
	return <-errc
}
