//go:build linux

package launch

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// handEgressListener brings lo up, listens on 127.0.0.1:port of this (the sandbox's) network
// namespace and sends the listening socket to the host on fd, keeping no copy: from then on
// only the host holds it (Spec.EgressFD).
func handEgressListener(fd, port int) error {
	defer unix.Close(fd)
	if err := LoopbackUp(); err != nil {
		return err
	}
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %v", err)
	}
	defer unix.Close(s)
	if err := unix.Bind(s, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return fmt.Errorf("bind 127.0.0.1:%d: %v", port, err)
	}
	if err := unix.Listen(s, 128); err != nil {
		return fmt.Errorf("listen: %v", err)
	}
	if err := unix.Sendmsg(fd, []byte{1}, unix.UnixRights(s), nil, 0); err != nil {
		return fmt.Errorf("sending the listener to the host: %v", err)
	}
	return nil
}
