//go:build !unix

package owner

import "os"

// tryLock cannot tell a live holder here: every other lock is taken as free, so Claim must
// run only when no other process uses the store.
func tryLock(f *os.File) (bool, error) { return true, nil }

// flocks: this system has no flock(2).
const flocks = false

func lockShared(*os.File) error { return errNoFlock }

func keepOpen(f *os.File) error {
	f.Close()
	return errNoFlock
}
