package budget

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// owner is this open ledger's identity and the lock that shows it is alive: an exclusive
// flock on dir/<id>.lock held while the ledger is open. The kernel drops the lock when the
// process dies, however it dies.
type owner struct {
	id   string
	dir  string
	file *os.File
}

func newOwner(dir string) (*owner, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("budget: owner dir: %w", err)
	}
	id := NewID("o_")
	f, err := os.OpenFile(filepath.Join(dir, id+".lock"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("budget: owner lock: %w", err)
	}
	if ok, err := tryLock(f); err != nil || !ok {
		f.Close()
		return nil, fmt.Errorf("budget: owner lock: %v", errors.Join(err, errors.New("held")))
	}
	return &owner{id: id, dir: dir, file: f}, nil
}

func (o *owner) release() error {
	name := o.file.Name()
	err := os.Remove(name)
	return errors.Join(err, o.file.Close())
}

// claim reports whether the owner other is gone; when it is, claim holds other's lock (so
// a concurrent Recover in another process does not also claim it) until unlock is called.
func (o *owner) claim(other string) (gone bool, unlock func(), err error) {
	if filepath.Base(other) != other || other == "" {
		return false, func() {}, fmt.Errorf("budget: bad owner id %q", other)
	}
	name := filepath.Join(o.dir, other+".lock")
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return true, func() {}, nil // closed cleanly, or its lock file was removed
	}
	if err != nil {
		return false, func() {}, fmt.Errorf("budget: owner lock: %w", err)
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
