//go:build !plan9

package tokenconn

import "syscall"

// errReset is a connection reset by the peer, which ends a channel as an end of file does.
var errReset error = syscall.ECONNRESET
