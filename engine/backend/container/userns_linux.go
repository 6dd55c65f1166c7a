//go:build linux

package container

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
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
// subordinate ids. A block is held by an flock on a file of its own in a directory every
// backend of this host shares (usernsDir), so servers of the host lease from one pool; the
// lock dies with its holder, so a killed server's blocks come free by themselves.
const (
	usernsFirst  = 0x6000_0000
	usernsBlock  = 1 << 16
	usernsBlocks = 4096
)

// usernsDir is where the blocks' lock files live: not under a backend's StateDir, which a
// service's private /tmp may make its own.
var usernsDir = "/run/mcp-sandbox-userns"

// idBlock is one leased block of host ids.
type idBlock struct {
	First uint32
	lock  *os.File
}

// Release frees the block; the execution's container must be gone.
func (b *idBlock) Release() {
	if b != nil && b.lock != nil {
		b.lock.Close()
	}
}

// leaseIDBlock takes a free block, starting the search at a random one.
func leaseIDBlock() (*idBlock, error) {
	if err := os.MkdirAll(usernsDir, 0o700); err != nil {
		return nil, fmt.Errorf("the user namespaces' lock directory: %v", err)
	}
	var r [4]byte
	_, _ = rand.Read(r[:])
	start := int(binary.LittleEndian.Uint32(r[:]) % usernsBlocks)
	for i := 0; i < usernsBlocks; i++ {
		n := (start + i) % usernsBlocks
		f, err := os.OpenFile(filepath.Join(usernsDir, strconv.Itoa(n)), os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("the user namespaces' lock directory: %v", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			continue
		}
		return &idBlock{First: usernsFirst + uint32(n)*usernsBlock, lock: f}, nil
	}
	return nil, fmt.Errorf("every one of the %d blocks of host ids for user namespaces is in use", usernsBlocks)
}

// usernsMap are the runtime's flags that map the container's ids 0-65535 to the block.
func usernsMap(first uint32) []string {
	m := "0:" + strconv.FormatUint(uint64(first), 10) + ":" + strconv.Itoa(usernsBlock)
	return []string{"--uidmap", m, "--gidmap", m}
}
