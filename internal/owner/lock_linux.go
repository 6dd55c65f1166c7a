//go:build linux

package owner

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// lockPrune is how long a dead owner's lock file is kept for the sweeps that may still need
// it (an owner in another pid namespace has no other proof).
const lockPrune = 24 * time.Hour

// pruneEvery is how often the lock directory is pruned at most, by whichever process sweeps
// first after that: a prune reads every lock file (one per process that ever took a tag, a
// day's worth: thousands on a busy host, 17-60 ms on the development machine with 4,100),
// and only files over lockPrune old ever go, so a prune per process bought nothing but a
// slower start for every one-shot `mcp-sandbox run`.
const pruneEvery = time.Hour

// pruneMark is the file in the lock directory whose modification time says when it was last
// pruned. It is neither a lock file nor a set-up file, so no prune removes it.
const pruneMark = ".pruned"

// lockDir is where owners' lock files live: one directory per effective uid under the
// temporary directory, made 0700, so only this uid (and root) can make or remove a lock file
// there. "" when it is not ours or cannot be made: there is no lock proof then, and why says
// so (LockDirProblem).
func lockDir() (dir, why string) {
	dir = filepath.Join(os.TempDir(), "mcp-sandbox-owners-"+strconv.Itoa(os.Geteuid()))
	err := os.Mkdir(dir, 0o700)
	if err == nil || errors.Is(err, os.ErrExist) {
		if _, err = OwnDir(dir); err == nil {
			return dir, ""
		}
	}
	return "", fmt.Sprintf("the owners' lock directory cannot be used (%v): what a server in another pid namespace "+
		"(a test's, a container's sharing this temporary directory) leaves behind cannot be proven dead, so it is never swept; "+
		"if another account made %s, remove it, and the next server makes it again, 0700 and this account's", err, dir)
}

// OwnDir returns dir's file info, or says why dir is not a directory (not a link) of this
// uid's that no one else may write: a file in such a directory was made by a process of this
// uid. The owners' lock directory is checked so, and so is the init helper's (cmd/mcp-sandbox).
func OwnDir(dir string) (os.FileInfo, error) {
	info, err := os.Lstat(dir)
	if err != nil {
		return nil, err
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	switch {
	case !info.IsDir():
		return nil, fmt.Errorf("%s is not a directory", dir)
	case !ok || int(st.Uid) != os.Geteuid():
		return nil, fmt.Errorf("%s belongs to another user", dir)
	case info.Mode().Perm()&0o022 != 0:
		return nil, fmt.Errorf("%s may be written by other users (mode %o)", dir, info.Mode().Perm())
	}
	return info, nil
}

// holdLock makes dir/<tag>.lock and holds an exclusive flock on it for the rest of this
// process's life (the file is never closed; the kernel drops the lock when the process dies,
// however it dies). The file is locked before it gets its name, by a rename, so no sweep ever
// finds it unlocked while its owner lives. It returns the open file, nil when it failed.
func holdLock(dir, tag string) *os.File {
	if dir == "" || tag == "" {
		return nil
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	tmp := filepath.Join(dir, ".new-"+hex.EncodeToString(b[:]))
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return nil
	}
	ok, err := tryLock(f)
	if ok {
		err = os.Rename(tmp, filepath.Join(dir, tag+".lock"))
	}
	if !ok || err != nil {
		f.Close()
		os.Remove(tmp)
		return nil
	}
	return f
}

// lockFree reports whether path names a lock file that no process holds: proof that its
// owner, which held it from before it made anything until it died, is dead. A missing file
// proves nothing (an owner that made none, or whose lock is in another temporary directory).
func lockFree(path string) bool {
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	// Released at once, by the Close: the owner is dead for good, and a concurrent sweep
	// that finds the lock taken for that moment only leaves the sweep to this one.
	ok, _ := tryLock(f)
	return ok
}

// pruneDue reports whether dir is due a prune at now, and if so marks it pruned at now: at
// most one prune per pruneEvery among the processes sharing dir (two that look in the same
// moment may both prune, which is harmless). A mark that cannot be read or written means due:
// the prune itself never depends on it.
func pruneDue(dir string, now time.Time) bool {
	mark := filepath.Join(dir, pruneMark)
	if info, err := os.Lstat(mark); err == nil && info.Mode().IsRegular() {
		if age := now.Sub(info.ModTime()); age >= 0 && age < pruneEvery {
			return false
		}
	}
	if f, err := os.OpenFile(mark, os.O_CREATE|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600); err == nil {
		f.Close()
		_ = os.Chtimes(mark, now, now)
	}
	return true
}

// pruneLocks removes, from dir, the lock files of dead owners that started (the file's
// mtime) longer than lockPrune ago, and set-up files an owner died before naming. Removing a
// dead owner's lock file only takes away one proof of a death: nothing live is touched.
func pruneLocks(dir string, dead func(tag string) bool) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		switch tag, ok := strings.CutSuffix(e.Name(), ".lock"); {
		case ok && tagOnly().MatchString(tag) && time.Since(info.ModTime()) > lockPrune && dead(tag):
			os.Remove(path)
		case strings.HasPrefix(e.Name(), ".new-") && time.Since(info.ModTime()) > time.Minute && lockFree(path):
			os.Remove(path)
		}
	}
}
