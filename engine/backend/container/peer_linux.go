//go:build linux

package container

import "github.com/mcp-sandbox/mcp-sandbox/internal/spawn"

// peerProcess is the interpreter at the child's end of a channel, once the host knows its pid
// (the socket's peer credentials, or the container's cgroup when the channel is the standard
// streams): a pidfd of it, and whether the kernel is taking it down (spawn.Peer).
type peerProcess = spawn.Peer
