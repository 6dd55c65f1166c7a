//go:build unix

package python

import (
	"os"
	"syscall"
)

// access reports whether uid (with primary group gid) may use path as want asks (1 execute,
// 4 read), from its permission bits: the check the kernel makes, without being that uid.
func access(path string, uid, gid int, want uint32) error {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return err
	}
	mode := uint32(st.Mode) & 0o777
	if uid == 0 {
		if uint32(st.Mode)&syscall.S_IFMT == syscall.S_IFDIR || mode&0o111 != 0 || want != 1 {
			return nil
		}
		return os.ErrPermission
	}
	var bits uint32
	switch {
	case int(st.Uid) == uid:
		bits = mode >> 6
	case int(st.Gid) == gid:
		bits = mode >> 3
	default:
		bits = mode
	}
	if bits&want == want {
		return nil
	}
	return os.ErrPermission
}
