//go:build linux

package container

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/tokenconn"
	"golang.org/x/sys/unix"
)

// tokenTimeout bounds how long a connection may take to present the token (at most four
// present one at once: tokenconn's default).
const tokenTimeout = 5 * time.Second

// channel is the host's end of one execution's wire channel: a tokenconn.Channel on a Unix
// socket. Once a connection is accepted the listener is closed and its socket file removed, so
// a second connection is refused; the process that connected is known by the socket's peer
// credentials. It is an io.ReadWriteCloser with CloseWrite and SetWriteDeadline, safe for
// concurrent use.
type channel struct {
	*tokenconn.Channel
	proc peerProcess // the process that connected
}

// socketListener is the channel's listener: closing it removes the socket file.
type socketListener struct {
	*net.UnixListener
	path string
}

func (l socketListener) Close() error {
	err := l.UnixListener.Close()
	_ = os.Remove(l.path)
	return err
}

// listen creates the socket at path, readable and writable by anyone who can reach its
// directory (the directory's permissions are the access control; the token is the proof).
// A socket's path is bounded (108 bytes), and a state directory may be deep: the socket is
// bound through the directory's descriptor, so only its own name counts. onEnd, when not nil,
// runs once before Read reports the end of an accepted connection.
func listen(path, token string, onEnd func()) (*channel, error) {
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	short := fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), filepath.Base(path))
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: short, Net: "unix"})
	if err != nil {
		return nil, err
	}
	// Closing the listener must remove the socket by a name that still resolves.
	ul.SetUnlinkOnClose(false)
	ln := socketListener{ul, path}
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, err
	}
	c := &channel{}
	c.Channel = tokenconn.Serve(ln, token, &tokenconn.Options{Timeout: tokenTimeout, OnEnd: onEnd,
		Accepted: func(conn net.Conn) { c.proc.Set(peerPID(conn.(*net.UnixConn))) }})
	return c, nil
}

func peerPID(conn *net.UnixConn) int {
	raw, err := conn.SyscallConn()
	if err != nil {
		return 0
	}
	pid := 0
	_ = raw.Control(func(fd uintptr) {
		if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
			pid = int(cred.Pid)
		}
	})
	return pid
}

// fail ends the wait for a connection with err (the child exited, or the channel closed):
// Read and Write then return it. It does nothing once a connection is accepted.
func (c *channel) fail(err error) { c.Fail(err) }

// connected reports whether the child presented its token.
func (c *channel) connected() bool { return c.Connected() }

// peer is the pid (in this process's pid namespace) of the process that connected, 0 when
// unknown or not visible from here.
func (c *channel) peer() int { return c.proc.Pid() }

// awaitPeerExit blocks until the process that connected has exited, or stop is closed, or
// the channel ended without a connection; it reports whether the peer exited.
func (c *channel) awaitPeerExit(stop <-chan struct{}) bool {
	return c.proc.AwaitExit(c.Ready(), stop)
}

// awaitPeerExitFor waits up to d for the process that connected to be exiting, returning
// early when stop reports true; it reports whether the peer is exiting.
func (c *channel) awaitPeerExitFor(d time.Duration, stop func() bool) bool {
	return c.proc.AwaitExitFor(d, stop)
}

// peerExiting reports whether the process that connected has exited or is exiting.
func (c *channel) peerExiting() bool { return c.proc.Exiting() }

// Close closes the listener, any connection and the peer's pidfd, and waits for the accept
// loop and the token readers. It is idempotent.
func (c *channel) Close() error {
	c.Channel.Close()
	c.proc.Close()
	return nil
}
