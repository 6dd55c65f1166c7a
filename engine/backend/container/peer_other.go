//go:build !linux

package container

import "time"

// peerProcess is the interpreter at the child's end of a channel; off Linux it runs in the
// engine's VM, where no pid of this host names it: nothing about it is known here, and the
// container's end is what the engine reports (peer_linux.go has the local engine's).
type peerProcess struct{}

func (p *peerProcess) Set(int)                                    {}
func (p *peerProcess) Pid() int                                   { return 0 }
func (p *peerProcess) Exiting() bool                              { return false }
func (p *peerProcess) AwaitExit(ready, stop <-chan struct{}) bool { return false }
func (p *peerProcess) AwaitExitFor(time.Duration, func() bool) bool {
	return false
}
func (p *peerProcess) Close() {}
