package owner

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// The flocks that are not an owner's liveness: a pool of numbered leases servers of a host
// share (the container backend's blocks of host ids), and a file held shared for a process's
// life so that no other removes it while it is in use (the init helper's file and directory).
// Each lock is the kernel's, dropped however its holder dies.

// ErrAllLeased is Lease's error when every slot is held.
var ErrAllLeased = errors.New("every slot is leased")

// Lease takes one of the n slots of dir (made 0700), slot i held by an exclusive flock on
// dir/<i>, starting the search at a random slot so that servers starting together do not
// contend for the same one. release lets it go; a holder's death does too. Where there is no
// flock (Windows) it fails: a lease nothing enforces would be shared.
func Lease(dir string, n int) (slot int, release func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, nil, err
	}
	var r [4]byte
	_, _ = rand.Read(r[:])
	start := int(binary.LittleEndian.Uint32(r[:]) % uint32(n))
	for i := range n {
		slot := (start + i) % n
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(slot)), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return 0, nil, err
		}
		if err := lockLease(f); err != nil {
			f.Close()
			if errors.Is(err, errLeaseHeld) {
				continue
			}
			return 0, nil, err
		}
		return slot, func() { f.Close() }, nil
	}
	return 0, nil, ErrAllLeased
}

// errNoFlock: what only a real flock can settle (a lease, a shared hold) is refused where
// there is none.
var errNoFlock = errors.New("this system has no flock")

// errLeaseHeld: another holds the slot's lock.
var errLeaseHeld = errors.New("held")

// lockLease takes f's exclusive lock without waiting, or says why not.
func lockLease(f *os.File) error {
	if !flocks {
		return errNoFlock
	}
	ok, err := tryLock(f)
	switch {
	case err != nil:
		return err
	case !ok:
		return errLeaseHeld
	}
	return nil
}

// Share opens path and takes a shared flock on it, waiting while another removes it
// (RemoveUnheld's exclusive lock): while a process holds it, RemoveUnheld leaves the file be.
// Keep holds it for the rest of the process's life.
func Share(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if err := lockShared(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return f, nil
}

// Keep holds f's locks for the rest of the process's life, and closes f: its open file gets a
// descriptor of its own that nothing closes (an *os.File left unreferenced would be closed by
// its finalizer), close-on-exec so that no child inherits the lock.
func Keep(f *os.File) error { return keepOpen(f) }

// RemoveUnheld removes path when no process holds a flock on it (its exclusive lock is taken
// without waiting) and path still names the file locked, and reports whether it did.
func RemoveUnheld(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if ok, err := tryLock(f); !flocks || err != nil || !ok {
		return false
	}
	info, err := f.Stat()
	if err != nil {
		return false
	}
	if now, err := os.Lstat(path); err != nil || !os.SameFile(info, now) {
		return false
	}
	return os.Remove(path) == nil
}
