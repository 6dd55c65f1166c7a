package owner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Lock is the liveness lock of one open store that several processes share (the SQLite run
// ledger): an exclusive flock on dir/<id>.lock, held from Hold until Release. The kernel
// drops it when the process dies, however it dies, so a store whose lock can be taken is
// closed or dead, and what it left half done may be settled by another (Claim).
type Lock struct {
	id   string
	file *os.File
}

// Hold makes dir (0700) and dir/<id>.lock, and holds the lock. id must be fresh: an existing
// file of that name is an error.
func Hold(dir, id string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("owner: lock dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, id+".lock"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("owner: lock: %w", err)
	}
	if ok, err := tryLock(f); err != nil || !ok {
		f.Close()
		return nil, fmt.Errorf("owner: lock: %v", errors.Join(err, errors.New("held")))
	}
	return &Lock{id: id, file: f}, nil
}

// ID is the id the lock was held under.
func (l *Lock) ID() string { return l.id }

// Release removes the lock's file and lets the lock go. Call it once.
func (l *Lock) Release() error {
	err := os.Remove(l.file.Name())
	return errors.Join(err, l.file.Close())
}

// Claim reports whether the holder of dir/<id>.lock is gone (released, or dead). When it is,
// Claim holds that lock, so that a concurrent Claim in another process does not also find it
// gone, until unlock is called; unlock then removes the file. A missing file is a holder that
// released it (or whose file was removed): gone.
func Claim(dir, id string) (gone bool, unlock func(), err error) {
	if filepath.Base(id) != id || id == "" {
		return false, func() {}, fmt.Errorf("owner: bad lock id %q", id)
	}
	name := filepath.Join(dir, id+".lock")
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return true, func() {}, nil
	}
	if err != nil {
		return false, func() {}, fmt.Errorf("owner: lock: %w", err)
	}
	ok, err := tryLock(f)
	if err != nil || !ok {
		f.Close()
		return false, func() {}, err
	}
	return true, func() {
		_ = os.Remove(name)
		_ = f.Close()
	}, nil
}
