//go:build linux

package launch

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// TemplateLandlockABI is the Landlock ABI a template's children need: 6, the first with
// scopes, which keep a child's signals and abstract unix sockets inside its own domain (its
// siblings share the template's user namespace). The file accesses handled are ABI 5's.
const TemplateLandlockABI = 6

// LandlockABI is this kernel's Landlock ABI version, 0 without Landlock (not built in, not
// enabled among the LSMs, or refused by a seccomp filter).
func LandlockABI() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(v)
}

// The file accesses a ruleset handles (every one of ABI 5), and what a read-only and a
// read-write rule grant on a directory and on a file, as go-landlock's RODirs, ROFiles,
// RWDirs and RWFiles do: a rule on a file may name only the accesses that apply to a file.
const (
	landlockHandledFS = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_FILE | unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR |
		unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO |
		unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK | unix.LANDLOCK_ACCESS_FS_MAKE_SYM | unix.LANDLOCK_ACCESS_FS_REFER |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	landlockFileFS = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	landlockRO = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	landlockRW = landlockHandledFS
	// landlockScopes are the scopes a template's child restricts itself to (ABI 6).
	landlockScopes = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
)

// LandlockRuleset is l assembled for a template's child (Spec.Template) to install as it is:
// the child makes the system calls and nothing else, so the policy stays here. Little-endian:
// the file accesses the ruleset handles (u64) and its scopes (u64), then one record per path,
// read-only ones first: the accesses granted when the path is a directory (u64), those when it
// is anything else (u64), the path's length (u16) and the path. The child adds a rule for each
// path it finds (after its own mounts: a rule on a mount point does not reach a filesystem
// mounted there later) and passes over one it does not, as applyLandlock does.
func LandlockRuleset(l *Landlock) []byte {
	b := binary.LittleEndian.AppendUint64(nil, landlockHandledFS)
	b = binary.LittleEndian.AppendUint64(b, landlockScopes)
	add := func(paths []string, access uint64) {
		for _, p := range paths {
			if len(p) == 0 || len(p) > 4095 {
				continue
			}
			b = binary.LittleEndian.AppendUint64(b, access)
			b = binary.LittleEndian.AppendUint64(b, access&landlockFileFS)
			b = binary.LittleEndian.AppendUint16(b, uint16(len(p)))
			b = append(b, p...)
		}
	}
	add(l.ReadOnly, landlockRO)
	add(l.ReadWrite, landlockRW)
	return b
}
