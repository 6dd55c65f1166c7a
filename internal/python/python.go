package python

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Candidates are tried in order after a configured interpreter.
var Candidates = []string{"/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"}

// Find returns the absolute path of an interpreter that uid/gid can execute (a symbolic link
// is kept as it is, so a virtual environment stays one):
// configured when it is set (an error if that one is not usable), otherwise the first usable
// of lookPath("python3") and Candidates.
func Find(configured string, uid, gid int, lookPath func(string) (string, error)) (string, error) {
	if configured != "" {
		p, err := usable(configured, uid, gid)
		if err != nil {
			return "", fmt.Errorf("python %q: %w", configured, err)
		}
		return p, nil
	}
	var tried []string
	cands := append([]string(nil), Candidates...)
	if lookPath != nil {
		if p, err := lookPath("python3"); err == nil {
			cands = append([]string{p}, cands...)
		}
	}
	for _, c := range cands {
		p, err := usable(c, uid, gid)
		if err == nil {
			return p, nil
		}
		tried = append(tried, fmt.Sprintf("%s (%v)", c, err))
	}
	return "", fmt.Errorf("no python3 that uid %d can execute: tried %s; install python3 (apt-get install python3) or set python: in the profile", uid, strings.Join(tried, ", "))
}

// usable returns the absolute path to execute: the path as given, not the binary it links
// to, because a virtual environment is the interpreter started through its own bin/python3
// (the symlink next to pyvenv.cfg), and the same binary started as itself is the base
// interpreter without the environment's packages. Both the path and the binary must be
// reachable by uid/gid, and the binary must be a real interpreter.
func usable(path string, uid, gid int) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	if err := Reachable(abs, uid, gid, 1); err != nil {
		return "", err
	}
	if err := Reachable(real, uid, gid, 1); err != nil {
		return "", err
	}
	// A wrapper script (a pyenv shim, say) depends on an environment the sandbox does not
	// pass on, and execs something else: only a real interpreter binary will do.
	f, err := os.Open(real)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); runtime.GOOS == "linux" && (err != nil || string(magic[:]) != "\x7fELF") {
		return "", fmt.Errorf("%s is a wrapper script, not an interpreter binary", real)
	}
	return abs, nil
}

// Reachable checks that uid/gid may search every directory above path and has the access
// bit want (1 execute, 4 read) on path itself. Root passes any directory check, as the kernel
// does, but still needs an execute bit on a file.
func Reachable(path string, uid, gid int, want uint32) error {
	dir := filepath.Dir(path)
	for {
		if err := access(dir, uid, gid, 1); err != nil {
			return fmt.Errorf("%s is not searchable by uid %d", dir, uid)
		}
		if dir == "/" {
			break
		}
		dir = filepath.Dir(dir)
	}
	if err := access(path, uid, gid, want); err != nil {
		return fmt.Errorf("not executable by uid %d", uid)
	}
	return nil
}

// Dirs returns the directories the interpreter reads at run time: its prefixes and the
// entries of its default sys.path, as the interpreter itself reports them. For a virtual
// environment that is the environment (prefix, site-packages) and its base interpreter's
// (base_prefix, the standard library), so every backend binds or allows both.
func Dirs(ctx context.Context, python string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-I", "-c",
		"import sys\nfor p in {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix, *sys.path}:\n    print(p)")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("asking %s for its directories: %w", python, err)
	}
	var dirs []string
	for _, l := range bytes.Split(out, []byte("\n")) {
		p := string(bytes.TrimSpace(l))
		if p == "" || !filepath.IsAbs(p) {
			continue
		}
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			dirs = append(dirs, p)
		}
	}
	return dirs, nil
}
