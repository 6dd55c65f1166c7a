//go:build unix

package container

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// usernsLeases: blocks can be leased here.
const usernsLeases = true

// usernsDir is where the blocks' lock files live: not under a backend's StateDir, which a
// service's private /tmp may make its own.
var usernsDir = func() string {
	if runtime.GOOS == "linux" {
		return "/run/mcp-sandbox-userns"
	}
	return filepath.Join(os.TempDir(), "mcp-sandbox-userns")
}()

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
