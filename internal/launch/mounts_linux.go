//go:build linux

package launch

import (
	"fmt"
	"os"
	"path"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// buildRoot makes the helper's private root and pivots into it. It runs in a fresh mount
// namespace, as root of the helper's user namespace, before the identity drop: every mount
// is private (nothing propagates back to the host), the host's tree is detached after the
// pivot, and the root itself ends read-only. Only the workspace and /tmp are writable.
func buildRoot(m *Mounts, uid, gid int) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %v", err)
	}
	root := m.Root
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=4m,mode=0755"); err != nil {
		return fmt.Errorf("mounting the root tmpfs: %v", err)
	}
	// /tmp first: a read-only path under it (a virtual environment made in /tmp) is bound
	// on top of the fresh tmpfs rather than hidden under it.
	tmp := path.Join(root, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", tmp, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d,mode=1777", max(m.TmpBytes, 1<<20))); err != nil {
		return fmt.Errorf("mounting /tmp: %v", err)
	}
	paths := append([]string(nil), m.ReadOnly...)
	sort.Strings(paths)
	var done []string
	for _, p := range paths {
		if covered(p, done) {
			continue
		}
		if err := bindRO(p, path.Join(root, p), false); err != nil {
			return err
		}
		done = append(done, p)
	}
	for _, b := range m.Binds {
		if err := bindDeclared(b, path.Join(root, b.Path)); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(path.Join(root, "dev"), 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", path.Join(root, "dev"), "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "size=64k,mode=0755"); err != nil {
		return fmt.Errorf("mounting /dev: %v", err)
	}
	for _, d := range m.Devices {
		if err := bindRO(d, path.Join(root, d), true); err != nil {
			return err
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, path.Join(root, "dev", name)); err != nil {
			return fmt.Errorf("/dev/%s: %v", name, err)
		}
	}
	for name, content := range m.Files {
		p := path.Join(root, name)
		if err := os.MkdirAll(path.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return fmt.Errorf("writing %s: %v", name, err)
		}
	}
	if m.Workspace != "" {
		ws := path.Join(root, m.Workspace)
		if err := os.MkdirAll(ws, 0o755); err != nil {
			return err
		}
		// 0755: the host reads artifacts through this init's root, and under a subordinate
		// uid it is "other" to the workspace; nobody else can reach this mount namespace.
		opts := fmt.Sprintf("size=%d,mode=0755,uid=%d,gid=%d", max(m.WorkspaceBytes, 1<<20), uid, gid)
		if err := unix.Mount("tmpfs", ws, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return fmt.Errorf("mounting the workspace: %v", err)
		}
	}
	if m.Proc {
		// Mounted before the pivot, while the host's /proc is still visible: a kernel that
		// checks a new proc mount against the ones already visible accepts it then.
		p := path.Join(root, "proc")
		if err := os.MkdirAll(p, 0o555); err != nil {
			return err
		}
		if err := unix.Mount("proc", p, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("mounting /proc: %v", err)
		}
	}
	old := path.Join(root, ".old-root")
	if err := os.Mkdir(old, 0o700); err != nil {
		return err
	}
	if err := unix.PivotRoot(root, old); err != nil {
		return fmt.Errorf("pivot_root: %v", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Unmount("/.old-root", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the host's root: %v", err)
	}
	if err := os.Remove("/.old-root"); err != nil {
		return fmt.Errorf("removing the old root's mount point: %v", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("making the root read-only: %v", err)
	}
	if err := unix.Mount("", "/dev", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("making /dev read-only: %v", err)
	}
	if m.Loopback {
		if err := LoopbackUp(); err != nil {
			return err
		}
	}
	if m.Hostname != "" {
		if err := unix.Sethostname([]byte(m.Hostname)); err != nil {
			return fmt.Errorf("sethostname: %v", err)
		}
	}
	return nil
}

func covered(p string, done []string) bool {
	for _, d := range done {
		if p == d || strings.HasPrefix(p, strings.TrimSuffix(d, "/")+"/") {
			return true
		}
	}
	return false
}

// bindRO binds host path src at dst read-only; a symbolic link is recreated instead, and a
// missing source is skipped (not every host has /lib64). Device nodes keep their dev flag.
func bindRO(src, dst string, device bool) error {
	st, err := os.Lstat(src)
	if err != nil {
		return nil
	}
	if err := os.MkdirAll(path.Dir(dst), 0o755); err != nil {
		return err
	}
	switch {
	case st.Mode()&os.ModeSymlink != 0:
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	case st.IsDir():
		err = os.MkdirAll(dst, 0o755)
	default:
		var f *os.File
		if f, err = os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			f.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("mount point for %s: %v", src, err)
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("binding %s: %v", src, err)
	}
	// Read-only (and nosuid, nodev) all the way down: a remount touches only the top mount,
	// so the mounts a recursive bind brought along get the attributes through mount_setattr.
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID}
	if !device {
		attr.Attr_set |= unix.MOUNT_ATTR_NODEV
	}
	if err := unix.MountSetattr(unix.AT_FDCWD, dst, unix.AT_RECURSIVE|unix.AT_SYMLINK_NOFOLLOW, attr); err != nil {
		// Kernels before 5.12: the top mount at least.
		flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND | unix.MS_RDONLY | unix.MS_NOSUID)
		if !device {
			flags |= unix.MS_NODEV
		}
		if err := unix.Mount("", dst, "", flags, ""); err != nil {
			return fmt.Errorf("making %s read-only: %v", src, err)
		}
	}
	return nil
}

// bindDeclared binds a declared path at dst: nosuid and nodev, read-only unless b.Writable.
// The path must exist; a symbolic link is bound as what it leads to, as mount(2) does.
func bindDeclared(b Bind, dst string) error {
	st, err := os.Stat(b.Path)
	if err != nil {
		return fmt.Errorf("declared path %s: %v", b.Path, err)
	}
	if err := os.MkdirAll(path.Dir(dst), 0o755); err != nil {
		return err
	}
	// A path below a system path bound read-only is there already: mounted over as it is.
	if _, lerr := os.Lstat(dst); lerr != nil {
		if st.IsDir() {
			err = os.MkdirAll(dst, 0o755)
		} else {
			var f *os.File
			if f, err = os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				f.Close()
			}
		}
		if err != nil {
			return fmt.Errorf("mount point for %s: %v", b.Path, err)
		}
	}
	if err := unix.Mount(b.Path, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("binding %s: %v", b.Path, err)
	}
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND | unix.MS_NOSUID | unix.MS_NODEV)
	if !b.Writable {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
		flags |= unix.MS_RDONLY
	}
	if err := unix.MountSetattr(unix.AT_FDCWD, dst, unix.AT_RECURSIVE|unix.AT_SYMLINK_NOFOLLOW, attr); err != nil {
		if err := unix.Mount("", dst, "", flags, ""); err != nil { // kernels before 5.12
			return fmt.Errorf("making %s %s: %v", b.Path, map[bool]string{false: "read-only", true: "nosuid"}[b.Writable], err)
		}
	}
	return nil
}

// LoopbackUp sets lo up: in a fresh network namespace it exists but is down.
func LoopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %v", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	ifr.SetUint16(unix.IFF_UP | unix.IFF_RUNNING)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bringing lo up: %v", err)
	}
	return nil
}

// channelHungUp reports whether the host's end of fd 3 is closed (the host is gone).
func channelHungUp() bool {
	fds := []unix.PollFd{{Fd: 3, Events: unix.POLLRDHUP}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0
}
