package inithelper

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/owner"
	"golang.org/x/sys/unix"
)

// The embedded helper's file is dir/init-<first 16 hex digits of its SHA-256>, in a directory
// of this uid's under the temporary directory, made 0755: a template's helper runs as an
// unprivileged host uid and must be able to exec it (so not under a 0700 home or state
// directory). The name is the content's, so a file of that name is complete and right: it is
// made under a temporary name and linked into place, never renamed over one a server may be
// executing; and only this uid can write the directory.
//
// Every server holds a shared flock on the file it execs for its life (owner.Share, then
// owner.Keep), and removes another build's helper only when no process holds one
// (owner.RemoveUnheld), so an upgrade leaves no stale helpers behind and never removes one a
// running server still execs. It holds one on the directory too: systemd-tmpfiles' age-based cleaning of the
// temporary directory skips a directory another process holds a flock on, and an idle server's
// helper may not have been exec'd for longer than that age.

func resolve(fsys fs.FS) Helper {
	size, sum, why := embeddedHelper(fsys)
	if why != "" {
		return Helper{Why: why}
	}
	dir := filepath.Join(os.TempDir(), "mcp-sandbox-init-"+strconv.Itoa(os.Geteuid()))
	path, f, err := install(dir, fsys, size, sum)
	if err == nil {
		err = owner.Keep(f)
	}
	if err == nil {
		f, err = owner.Share(dir)
	}
	if err == nil {
		err = owner.Keep(f)
	}
	if err != nil {
		h := Helper{Why: "the embedded init helper could not be put in place: " + err.Error()}
		slog.Warn("the init helper: each sandbox child starts this whole binary instead of the helper alone, which costs it more CPU", "why", h.Why)
		return h
	}
	return Helper{Path: path, Embedded: true, Size: size}
}

// install writes the helper in fsys (size bytes, SHA-256 sum) to dir unless it is there,
// takes the shared lock on it, prunes other builds' helpers no one holds, and returns its
// path and the locked file.
func install(dir string, fsys fs.FS, size int64, sum string) (string, *os.File, error) {
	if err := ownDir(dir); err != nil {
		return "", nil, err
	}
	path := filepath.Join(dir, "init-"+sum[:16])
	for range 3 {
		f, err := owner.Share(path)
		if errors.Is(err, fs.ErrNotExist) {
			if err := create(dir, path, fsys); err != nil && !errors.Is(err, fs.ErrExist) {
				return "", nil, err
			}
			continue
		}
		if err != nil {
			return "", nil, err
		}
		switch why := check(f, path, size); why {
		case "":
			prune(dir, filepath.Base(path))
			return path, f, nil
		case replaced: // another process's prune or install raced this one: look again
			f.Close()
		default: // not a file this code made: remove it and make it again
			f.Close()
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return "", nil, fmt.Errorf("%s %s, and removing it failed: %w", path, why, err)
			}
		}
	}
	return "", nil, fmt.Errorf("%s kept changing while it was written and locked", path)
}

// ownDir makes dir (0755) if needed and says why it cannot hold the helper: it must be a
// directory of this uid's that no one else may write, on a mount that allows exec.
func ownDir(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	info, err := owner.OwnDir(dir)
	if err != nil {
		return err
	}
	// Made under a umask that took the others' search bit: templates exec as another uid.
	if info.Mode().Perm() != 0o755 {
		if err := os.Chmod(dir, 0o755); err != nil {
			return err
		}
	}
	var fsst unix.Statfs_t
	if err := unix.Statfs(dir, &fsst); err == nil && fsst.Flags&unix.ST_NOEXEC != 0 {
		return fmt.Errorf("%s is on a mount that forbids exec (noexec); set TMPDIR to a directory on one that allows it", dir)
	}
	return nil
}

// replaced is check's answer when path no longer names the open file.
const replaced = "was replaced"

// check says what is wrong with the open helper f at path, or "".
func check(f *os.File, path string, size int64) string {
	info, err := f.Stat()
	if err != nil {
		return "cannot be read: " + err.Error()
	}
	st, _ := info.Sys().(*syscall.Stat_t)
	now, err := os.Lstat(path)
	if err != nil || !os.SameFile(info, now) {
		return replaced
	}
	switch {
	case !info.Mode().IsRegular():
		return "is not a regular file"
	case st == nil || int(st.Uid) != os.Geteuid():
		return "belongs to another user"
	case info.Mode().Perm() != 0o555:
		return fmt.Sprintf("has mode %o, not 0555", info.Mode().Perm())
	case info.Size() != size:
		return fmt.Sprintf("has %d bytes, not %d", info.Size(), size)
	}
	return ""
}

// create writes the embedded helper to a temporary file in dir and links it to path, which
// fails with fs.ErrExist when another process made it first.
func create(dir, path string, fsys fs.FS) error {
	src, err := fsys.Open("embedded/init")
	if err != nil {
		return err
	}
	defer src.Close()
	// No fork while a descriptor of the file is open for writing: a child forked meanwhile
	// would hold it until its exec, and an exec of the helper then fails with ETXTBSY
	// (golang/go#22315). Forks take ForkLock for writing.
	syscall.ForkLock.RLock()
	tmp, err := os.CreateTemp(dir, ".init-*")
	if err == nil {
		_, err = io.Copy(tmp, src)
		if err == nil {
			err = tmp.Chmod(0o555)
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
	}
	syscall.ForkLock.RUnlock()
	if tmp != nil {
		defer os.Remove(tmp.Name())
	}
	if err != nil {
		return fmt.Errorf("writing the init helper to %s: %w", dir, err)
	}
	return os.Link(tmp.Name(), path)
}

// prune removes the other builds' helpers in dir that no process holds, and temporary files a
// writer that died left there over an hour ago.
func prune(dir, keep string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		name, path := e.Name(), filepath.Join(dir, e.Name())
		switch {
		case name == keep:
		case strings.HasPrefix(name, ".init-"):
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > time.Hour {
				os.Remove(path)
			}
		case strings.HasPrefix(name, "init-"):
			owner.RemoveUnheld(path)
		}
	}
}
