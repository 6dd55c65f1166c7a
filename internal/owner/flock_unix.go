//go:build unix

package owner

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// flocks: this system has flock(2).
const flocks = true

// tryLock takes an exclusive flock on f without waiting; false when another holds it.
func tryLock(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

// lockShared takes a shared flock on f, waiting for an exclusive holder to let go.
func lockShared(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_SH) }

// keepOpen gives f's open file a descriptor of its own that nothing closes, close-on-exec so
// no child inherits it, and closes f: the file's flocks are then held until the process dies.
func keepOpen(f *os.File) error {
	defer f.Close()
	_, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	return err
}
