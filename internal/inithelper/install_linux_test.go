package inithelper

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/mcp-sandbox/mcp-sandbox/internal/owner"
	"golang.org/x/sys/unix"
)

// fakeHelper is an embedded FS whose helper is a shell script exiting with code.
func fakeHelper(code string) (fstest.MapFS, int64, string) {
	b := []byte("#!/bin/sh\nexit " + code + "\n")
	sum := sha256.Sum256(b)
	hexSum := hex.EncodeToString(sum[:])
	return fstest.MapFS{
		"embedded/init":        {Data: b},
		"embedded/init.sha256": {Data: []byte(hexSum + "\n")},
	}, int64(len(b)), hexSum
}

func installed(t *testing.T, dir string, fsys fstest.MapFS) (string, *os.File) {
	t.Helper()
	size, sum, why := embeddedHelper(fsys)
	if why != "" {
		t.Fatal(why)
	}
	path, f, err := install(dir, fsys, size, sum)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return path, f
}

// TestInstallWritesOnceAndExecs: the helper is written once under its digest's name, 0555, in
// a 0755 directory, runs from there, and a second server reuses the same file.
func TestInstallWritesOnceAndExecs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "init")
	fsys, _, sum := fakeHelper("7")
	path, _ := installed(t, dir, fsys)
	if want := filepath.Join(dir, "init-"+sum[:16]); path != want {
		t.Fatalf("path %s, want %s", path, want)
	}
	for p, mode := range map[string]os.FileMode{dir: 0o755, path: 0o555} {
		if info, err := os.Stat(p); err != nil || info.Mode().Perm() != mode {
			t.Fatalf("%s: %v %v, want mode %o", p, info.Mode(), err, mode)
		}
	}
	err := exec.Command(path).Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 7 {
		t.Fatalf("running the installed helper: %v, want exit status 7", err)
	}
	before, _ := os.Stat(path)
	again, _ := installed(t, dir, fsys)
	after, _ := os.Stat(again)
	if again != path || !os.SameFile(before, after) {
		t.Fatal("a second install wrote the helper again")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("the directory holds %d entries, want the helper alone", len(entries))
	}
}

// TestInstallRefusesAnUnsafeDirectory: a directory others may write, or a link, is not used.
func TestInstallRefusesAnUnsafeDirectory(t *testing.T) {
	fsys, size, sum := fakeHelper("0")
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, _, err := install(open, fsys, size, sum); err == nil || !strings.Contains(err.Error(), "written by other users") {
		t.Fatalf("a world-writable directory: %v", err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	if _, _, err := install(link, fsys, size, sum); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("a link: %v", err)
	}
	// A directory made under a umask that took the others' search bit is opened to them.
	private := filepath.Join(t.TempDir(), "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	installed(t, private, fsys)
	if info, _ := os.Stat(private); info.Mode().Perm() != 0o755 {
		t.Fatalf("the directory's mode is %o, want 0755", info.Mode().Perm())
	}
}

// TestInstallReplacesABadFile: a file of the helper's name that is not what this code makes
// (wrong size or mode: a write cut short by hand, an edit) is made again.
func TestInstallReplacesABadFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "init")
	fsys, _, sum := fakeHelper("3")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "init-"+sum[:16])
	if err := os.WriteFile(bad, []byte("#!/bin/sh\nexit 9\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path, _ := installed(t, dir, fsys)
	if b, _ := os.ReadFile(path); string(b) != string(fsys["embedded/init"].Data) {
		t.Fatalf("the helper holds %q", b)
	}
}

// TestInstallPrunesUnheldHelpers: another build's helper no process holds is removed; one a
// live server holds (its shared flock) stays.
func TestInstallPrunesUnheldHelpers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "init")
	oldFS, _, _ := fakeHelper("1")
	heldFS, _, _ := fakeHelper("2")
	oldPath, oldFile := installed(t, dir, oldFS)
	oldFile.Close() // its server ended
	heldPath, _ := installed(t, dir, heldFS)
	if _, err := os.Stat(oldPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an unheld helper of another build stayed: %v", err)
	}
	newFS, _, _ := fakeHelper("4")
	installed(t, dir, newFS)
	if _, err := os.Stat(heldPath); err != nil {
		t.Fatalf("a helper a live server holds was removed: %v", err)
	}
	requireHeld(t, heldPath)
}

// requireHeld fails t unless some process holds a lock on path: an exclusive lock is refused.
func requireHeld(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); !errors.Is(err, unix.EWOULDBLOCK) {
		t.Fatalf("an exclusive lock on a held helper: %v, want EWOULDBLOCK", err)
	}
}

// TestNoEmbeddedHelper: a build made without the overlay says so, and the binary is its own
// helper.
func TestNoEmbeddedHelper(t *testing.T) {
	h := resolve(fstest.MapFS{"embedded/README.md": {Data: []byte("x")}})
	if h.Path != "" || h.Embedded || !strings.Contains(h.Why, "embeds none") {
		t.Fatalf("%+v", h)
	}
}

// TestKeepHoldsTheLock: the lock a server keeps on its helper outlives the *os.File it was
// taken through, whatever the collector does with that.
func TestKeepHoldsTheLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "init")
	fsys, size, sum := fakeHelper("5")
	path, f, err := install(dir, fsys, size, sum)
	if err != nil {
		t.Fatal(err)
	}
	if err := owner.Keep(f); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.GC()
	requireHeld(t, path)
}
