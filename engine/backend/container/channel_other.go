//go:build !linux

package container

import "errors"

// listen: off Linux the engine's containers run in a VM, which no socket of this host
// reaches; the channel is always the container's standard streams (streams.go).
func listen(string, string, func()) (hostChannel, error) {
	return nil, errors.New("the socket channel needs an engine on this Linux host")
}
