package container

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"github.com/mcp-sandbox/mcp-sandbox/internal/owner"
)

// Each execution of podman as root runs in a user namespace of its own: the container's ids
// 0-65535 map to a block of host ids no other execution holds while it runs, so no two
// executions (no two tenants) share a host uid, a keyring or a uid-wide kernel quota, and a
// process of one can reach nothing of another's as the same user. (--userns=auto would need an
// operator to give podman's "containers" user subordinate ranges; an explicit mapping needs
// nothing.) The image's layers are mapped by the storage driver, not copied.
//
// The blocks lie in usernsFirst…usernsFirst+usernsBlocks*usernsBlock, inside the range systemd
// sets aside for container ids (524288-1879048191) and above what useradd hands out as
// subordinate ids. A block is leased from internal/owner's pool in a directory every backend
// of this host shares (usernsDir), so servers of the host lease from one pool; the lease is a
// flock that dies with its holder, so a killed server's blocks come free by themselves. An
// engine in a VM that runs as root there (a rootful Podman machine) gets the same, its blocks
// leased on this host, the one whose servers share that VM. Windows has no flock to lease
// with (usernsLeases), and its executions run in the engine's own user namespace (a rootless
// Podman machine's) or none (a rootful one, Docker Desktop's): Facts.UserNamespace says which
// it is not.
const (
	usernsFirst  = 0x6000_0000
	usernsBlock  = 1 << 16
	usernsBlocks = 4096
)

// usernsLeases: blocks can be leased here.
const usernsLeases = runtime.GOOS != "windows"

// usernsDir is where the blocks' lock files live: not under a backend's StateDir, which a
// service's private /tmp may make its own.
var usernsDir = func() string {
	if runtime.GOOS == "linux" {
		return "/run/mcp-sandbox-userns"
	}
	return filepath.Join(os.TempDir(), "mcp-sandbox-userns")
}()

// usernsMap are the runtime's flags that map the container's ids 0-65535 to the block.
func usernsMap(first uint32) []string {
	m := "0:" + strconv.FormatUint(uint64(first), 10) + ":" + strconv.Itoa(usernsBlock)
	return []string{"--uidmap", m, "--gidmap", m}
}

// idBlock is one leased block of host ids.
type idBlock struct {
	First   uint32
	release func()
}

// Release frees the block; the execution's container must be gone.
func (b *idBlock) Release() {
	if b != nil && b.release != nil {
		b.release()
	}
}

// leaseIDBlock takes a free block.
func leaseIDBlock() (*idBlock, error) {
	n, release, err := owner.Lease(usernsDir, usernsBlocks)
	switch {
	case errors.Is(err, owner.ErrAllLeased):
		return nil, fmt.Errorf("every one of the %d blocks of host ids for user namespaces is in use", usernsBlocks)
	case err != nil:
		return nil, fmt.Errorf("the user namespaces' lock directory: %v", err)
	}
	return &idBlock{First: usernsFirst + uint32(n)*usernsBlock, release: release}, nil
}
