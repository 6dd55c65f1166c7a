//go:build linux

package container

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// ownerPrefix names an owner's directory under the state directory: ownerPrefix + id.
	ownerPrefix = "mcp-sandbox-ctr-"
	// newOwnerPrefix names a directory being set up; it becomes an owner's by a rename, once
	// its lock is held, so a sweep never sees an owner's directory without its lock.
	newOwnerPrefix = ".mcp-sandbox-ctr-new-"
	ownerLock      = "owner.lock"
	// OwnerLabel is the label every container of this backend carries: its owner's id.
	OwnerLabel = "io.mcp-sandbox.owner"
)

// owner is one Backend's claim on what it creates: a directory holding the executions'
// socket directories, and a lock held for the Backend's lifetime. The kernel releases the
// lock when the process dies, however it dies, so a lock another process can take is proof
// that its owner is gone.
type owner struct {
	id   string
	dir  string
	lock *os.File
}

func newOwner(stateDir string) (*owner, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	o := &owner{id: hex.EncodeToString(b[:])}
	tmp, err := os.MkdirTemp(stateDir, newOwnerPrefix)
	if err != nil {
		return nil, err
	}
	if o.lock, err = os.OpenFile(filepath.Join(tmp, ownerLock), os.O_CREATE|os.O_RDWR, 0o600); err == nil {
		err = unix.Flock(int(o.lock.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	}
	if err == nil {
		o.dir = filepath.Join(stateDir, ownerPrefix+o.id)
		err = os.Rename(tmp, o.dir)
	}
	if err != nil {
		if o.lock != nil {
			o.lock.Close()
		}
		os.RemoveAll(tmp)
		return nil, err
	}
	return o, nil
}

// close removes the owner's directory and releases its lock. Executions must have ended.
func (o *owner) close() {
	os.RemoveAll(o.dir)
	o.lock.Close()
}

// sweep removes what dead owners left under stateDir: their containers (by label), their
// cgroups and their directories. An owner is dead when its lock can be taken; every other
// owner, and everything not labelled, is left alone.
func sweep(ctx context.Context, rt *Runtime, stateDir string) {
	entries, err := os.ReadDir(stateDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		dir := filepath.Join(stateDir, name)
		switch {
		case !e.IsDir():
		case strings.HasPrefix(name, ownerPrefix):
			sweepOwner(ctx, rt, dir, strings.TrimPrefix(name, ownerPrefix))
		case strings.HasPrefix(name, newOwnerPrefix):
			// Set up by an owner that died before it finished: nothing was started from it.
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > time.Minute {
				if release, dead := tryLock(dir); dead {
					os.RemoveAll(dir)
					release()
				}
			}
		}
	}
}

// tryLock takes dir's owner lock when its owner is dead.
func tryLock(dir string) (release func(), dead bool) {
	f, err := os.OpenFile(filepath.Join(dir, ownerLock), os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) && strings.HasPrefix(filepath.Base(dir), newOwnerPrefix) {
		return func() {}, true
	}
	if err != nil {
		return nil, false
	}
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		f.Close()
		return nil, false
	}
	return func() { f.Close() }, true
}

func sweepOwner(ctx context.Context, rt *Runtime, dir, id string) {
	release, dead := tryLock(dir)
	if !dead || !isOwnerID(id) {
		return
	}
	defer release()
	ids, err := cli(ctx, rt.Path, "ps", "-a", "-q", "--filter", "label="+OwnerLabel+"="+id)
	if err != nil {
		slog.Warn("container sweep: listing a dead owner's containers failed; they are left for the next start", "owner", id, "err", err)
		return
	}
	if ids := strings.Fields(ids); len(ids) > 0 {
		args := append(rmArgs(rt), ids...)
		if _, err := cli(ctx, rt.Path, args...); err != nil {
			slog.Warn("container sweep: removing a dead owner's containers failed; they are left for the next start", "owner", id, "err", err)
			return
		}
		slog.Info("container sweep: removed the containers of an owner that is gone", "owner", id, "containers", len(ids))
	}
	removeOwnerCgroups(cgroupName(id, ""))
	os.RemoveAll(dir)
}

func isOwnerID(id string) bool {
	if len(id) != 12 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}

// cgroupName is the execution cgroup's name for owner id and execution tag.
func cgroupName(id, tag string) string { return "ctr-" + id + "-" + tag }

// rmArgs removes containers at once, their anonymous volumes included.
func rmArgs(rt *Runtime) []string {
	if rt.Kind == "podman" {
		return []string{"rm", "--force", "--volumes", "--time", "0", "--ignore"}
	}
	return []string{"rm", "--force", "--volumes"}
}
