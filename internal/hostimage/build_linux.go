package hostimage

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Build assembles spec's root filesystem from this host's files as a tar stream and imports
// it with the runtime, tags it, and tries it (docs/design.md §20). What it did goes to log.
func Build(ctx context.Context, spec Spec, log io.Writer) error {
	start := time.Now()
	r := &rootfs{seen: map[string]bool{}}
	pr, pw := io.Pipe()
	r.tw = tar.NewWriter(pw)
	entry := `WORKDIR /workspace`
	if spec.Binary != "" {
		entry = `ENTRYPOINT ["/usr/local/bin/mcp-sandbox"]`
	}
	imp := exec.CommandContext(ctx, spec.Runtime, "import", "--change", entry, "-", spec.Tags[0])
	imp.Stdin = pr
	var out bytes.Buffer
	imp.Stdout, imp.Stderr = &out, &out
	if err := imp.Start(); err != nil {
		return fmt.Errorf("%s import: %w", spec.Runtime, err)
	}
	var real string
	var err error
	func() {
		defer pw.Close()
		real, err = r.assemble(spec)
		if err == nil {
			err = r.tw.Close()
		}
		if err != nil {
			pw.CloseWithError(err)
		}
	}()
	werr := imp.Wait()
	if err != nil {
		return fmt.Errorf("assembling the image: %w", err)
	}
	if werr != nil {
		return fmt.Errorf("%s import: %v: %s", spec.Runtime, werr, strings.TrimSpace(out.String()))
	}
	if err := tryImage(ctx, spec, real); err != nil {
		_ = exec.Command(spec.Runtime, "rmi", spec.Tags[0]).Run()
		return err
	}
	for _, t := range spec.Tags[1:] {
		if b, err := exec.CommandContext(ctx, spec.Runtime, "tag", spec.Tags[0], t).CombinedOutput(); err != nil {
			return fmt.Errorf("%s tag %s: %v: %s", spec.Runtime, t, err, strings.TrimSpace(string(b)))
		}
	}
	what := "from " + real
	if spec.Binary != "" {
		what = "with " + spec.Binary
		if real != "" {
			what += " and " + real
		}
	}
	fmt.Fprintf(log, "built %s %s (%d MB of files, %s)\n", strings.Join(spec.Tags, " "), what, r.bytes>>20, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// tryImage runs what the image is for once, with no network: the interpreter importing what
// the bootstrap needs, and the binary printing its version.
func tryImage(ctx context.Context, spec Spec, real string) error {
	run := func(args ...string) error {
		cmd := exec.CommandContext(ctx, spec.Runtime, append(append([]string{"run", "--rm", "--network=none", "--pull=never"}, TryLimits()...), args...)...)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("the image %s does not work: %s %s: %v: %s", spec.Tags[0], spec.Runtime, strings.Join(args, " "), err, strings.TrimSpace(string(b)))
		}
		return nil
	}
	if real != "" {
		if err := run("--entrypoint", real, spec.Tags[0], "-I", "-c",
			`import _json, _socket, resource, asyncio, subprocess, threading, json, ctypes; ctypes.CDLL("librt.so.1")`); err != nil {
			return err
		}
	}
	if spec.Binary != "" {
		return run(spec.Tags[0], "version")
	}
	return nil
}

// TryLimits bounds the open files and processes of a trial run, within this process's own
// hard limits: a runtime's defaults (podman's 1048576 files, a process count) are refused
// where the limits it runs under are lower, as the container backend sets its own too.
func TryLimits() []string {
	var args []string
	for _, l := range []struct {
		name     string
		resource int
		want     uint64
	}{{"nofile", unix.RLIMIT_NOFILE, 1024}, {"nproc", unix.RLIMIT_NPROC, 4096}} {
		v := l.want
		var lim unix.Rlimit
		if unix.Getrlimit(l.resource, &lim) == nil {
			v = min(v, lim.Max)
		}
		args = append(args, "--ulimit", fmt.Sprintf("%s=%d:%d", l.name, v, v))
	}
	return args
}

// rootfs writes a root filesystem as a tar stream: host files at their own paths.
type rootfs struct {
	tw    *tar.Writer
	seen  map[string]bool // paths written
	bytes int64
}

// assemble writes spec's files and returns the interpreter's real path ("" when there is none).
func (r *rootfs) assemble(spec Spec) (string, error) {
	// Merged /usr as on the host: /bin, /lib, /lib64, /sbin are links into /usr when they are.
	for _, d := range []string{"/bin", "/lib", "/lib64", "/sbin"} {
		if target, err := os.Readlink(d); err == nil {
			if err := r.symlink(d, target); err != nil {
				return "", err
			}
		}
	}
	for _, d := range []string{"/etc", "/workspace", "/run/mcp-sandbox", "/proc", "/dev", "/sys", "/usr/bin"} {
		if err := r.dir(d, 0o755); err != nil {
			return "", err
		}
	}
	if err := r.dir("/tmp", 0o777|fs.ModeSticky); err != nil {
		return "", err
	}
	if err := r.data("/etc/passwd", 0o644, "root:x:0:0:root:/:/nonexistent\nnobody:x:65534:65534:nobody:/nonexistent:/nonexistent\n"); err != nil {
		return "", err
	}
	if err := r.data("/etc/group", 0o644, "root:x:0:\nnogroup:x:65534:\n"); err != nil {
		return "", err
	}
	if spec.Binary != "" {
		if err := r.binary(spec.Binary); err != nil {
			return "", err
		}
	}
	if spec.Kind == "server" {
		return "", nil
	}
	return r.python(spec.Python)
}

// binary writes this executable as /usr/local/bin/mcp-sandbox, the libraries it loads, and the
// system's CA certificates (the server reaches PostgreSQL and upstreams over TLS).
func (r *rootfs) binary(path string) error {
	if err := r.hostFile(path, "/usr/local/bin/mcp-sandbox"); err != nil {
		return err
	}
	libs, err := sharedLibraries(path)
	if err != nil {
		return err
	}
	for _, lib := range libs {
		if err := r.copy(lib); err != nil {
			return err
		}
	}
	for _, ca := range []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"} {
		if _, err := os.Stat(ca); err == nil {
			return r.copy(ca)
		}
	}
	return nil
}

// python writes the interpreter (at its own path and as /usr/bin/python3), its standard
// library and extension modules, every shared library they load with the loader, and glibc's
// companion libraries, which nothing links but a program may load (ctypes).
func (r *rootfs) python(python string) (string, error) {
	path, err := exec.LookPath(python)
	if err != nil {
		return "", fmt.Errorf("--python %s: %v", python, err)
	}
	if path, err = filepath.Abs(path); err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	out, err := exec.Command(real, "-I", "-S", "-c",
		`import sysconfig; print(sysconfig.get_path("stdlib")); print(sysconfig.get_path("platstdlib") + "/lib-dynload")`).Output()
	if err != nil {
		return "", fmt.Errorf("%s cannot say where its standard library is: %w", real, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		return "", fmt.Errorf("%s said %q for its standard library", real, out)
	}
	stdlib, dynload := lines[0], lines[1]
	if err := r.copy(real); err != nil {
		return "", err
	}
	for _, link := range []string{path, "/usr/bin/python3"} {
		if !r.seen[link] {
			if err := r.symlink(link, real); err != nil {
				return "", err
			}
		}
	}
	skip := map[string]bool{"test": true, "idlelib": true, "tkinter": true, "turtledemo": true, "ensurepip": true,
		"site-packages": true, "dist-packages": true}
	if err := r.tree(stdlib, func(top string) bool { return skip[top] || strings.HasPrefix(top, "config-") }); err != nil {
		return "", err
	}
	if filepath.Dir(dynload) != filepath.Clean(stdlib) {
		if err := r.tree(dynload, func(string) bool { return false }); err != nil {
			return "", err
		}
	}
	modules, _ := filepath.Glob(filepath.Join(dynload, "*.so"))
	libs, err := sharedLibraries(append([]string{real}, modules...)...)
	if err != nil {
		return "", err
	}
	libc := ""
	for _, lib := range libs {
		if err := r.copy(lib); err != nil {
			return "", err
		}
		if strings.HasPrefix(filepath.Base(lib), "libc.so") {
			libc = lib
		}
	}
	if libc != "" {
		for _, lib := range []string{"libpthread.so.0", "libdl.so.2", "librt.so.1", "libutil.so.1", "libresolv.so.2", "libanl.so.1", "libcrypt.so.1"} {
			if p := filepath.Join(filepath.Dir(libc), lib); exists(p) {
				if err := r.copy(p); err != nil {
					return "", err
				}
			}
		}
	}
	return real, nil
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// sharedLibraries lists what ldd says files load (the loader included); a static file loads
// nothing.
func sharedLibraries(files ...string) ([]string, error) {
	ldd, err := exec.LookPath("ldd")
	if err != nil {
		return nil, errors.New("ldd is not installed (it names the shared libraries to copy): apt-get install libc-bin")
	}
	out, _ := exec.Command(ldd, files...).Output() // a static file fails; its lines say so
	seen := map[string]bool{}
	var libs []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		var p string
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			p = f[2]
		case len(f) >= 1 && strings.HasPrefix(line, "\t/"):
			p = f[0]
		}
		if p != "" && !seen[p] {
			seen[p] = true
			libs = append(libs, p)
		}
	}
	return libs, nil
}

// canonical is path with its directory's links resolved on the host, so that a file is
// written under real directories (a link like /lib64 is written once, as a link).
func canonical(path string) (string, error) {
	dir, err := filepath.EvalSymlinks(filepath.Dir(path))
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, filepath.Base(path)), nil
}

// copy writes the host file at path at the same path: a link is written as a link, with
// what it points to (links followed) written too.
func (r *rootfs) copy(path string) error {
	p, err := canonical(path)
	if err != nil {
		return err
	}
	if r.seen[p] {
		return nil
	}
	st, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(p)
		if err != nil {
			return err
		}
		if err := r.copy(target); err != nil {
			return err
		}
		return r.symlink(p, target)
	}
	return r.hostFile(p, p)
}

// tree writes the directory dir (links followed, as tar --dereference) at the same path,
// leaving out the top-level entries skip names.
func (r *rootfs) tree(dir string, skip func(top string) bool) error {
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	to, err := canonical(dir)
	if err != nil {
		return err
	}
	return r.walk(root, to, skip, 0)
}

func (r *rootfs) walk(from, to string, skip func(string) bool, depth int) error {
	if depth > 64 {
		return fmt.Errorf("%s: directories nested too deep (a loop of links?)", from)
	}
	if err := r.dir(to, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if depth == 0 && skip(e.Name()) {
			continue
		}
		src, dst := filepath.Join(from, e.Name()), filepath.Join(to, e.Name())
		st, err := os.Stat(src) // links followed
		if err != nil {
			continue // a dangling link
		}
		switch {
		case st.IsDir():
			if err := r.walk(src, dst, skip, depth+1); err != nil {
				return err
			}
		case st.Mode().IsRegular():
			if err := r.hostFile(src, dst); err != nil {
				return err
			}
		}
	}
	return nil
}

// parents writes the directories above path not written yet.
func (r *rootfs) parents(path string) error {
	dir := filepath.Dir(path)
	if dir == "/" || r.seen[dir] {
		return nil
	}
	return r.dir(dir, 0o755)
}

func (r *rootfs) dir(path string, mode fs.FileMode) error {
	if r.seen[path] {
		return nil
	}
	if err := r.parents(path); err != nil {
		return err
	}
	r.seen[path] = true
	m := int64(mode.Perm())
	if mode&fs.ModeSticky != 0 {
		m |= 0o1000
	}
	return r.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(path, "/") + "/", Mode: m})
}

func (r *rootfs) symlink(path, target string) error {
	if err := r.parents(path); err != nil {
		return err
	}
	r.seen[path] = true
	return r.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: strings.TrimPrefix(path, "/"), Linkname: target, Mode: 0o777})
}

func (r *rootfs) data(path string, mode fs.FileMode, content string) error {
	return r.file(path, mode, int64(len(content)), strings.NewReader(content))
}

func (r *rootfs) hostFile(src, dst string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	return r.file(dst, st.Mode().Perm(), st.Size(), f)
}

func (r *rootfs) file(path string, mode fs.FileMode, size int64, content io.Reader) error {
	if r.seen[path] {
		return nil
	}
	if err := r.parents(path); err != nil {
		return err
	}
	r.seen[path] = true
	if err := r.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(path, "/"), Mode: int64(mode.Perm()), Size: size}); err != nil {
		return err
	}
	n, err := io.CopyN(r.tw, content, size)
	r.bytes += n
	return err
}
