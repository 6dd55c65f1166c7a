//go:build linux

package launch

import (
	"encoding/binary"
	"fmt"
	"unsafe"

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
// read-write rule grant. The helper's grants are go-landlock's RODirs, ROFiles, RWDirs and
// RWFiles, which the helper used until it made the system calls itself: read-write is every
// handled access but REFER and IOCTL_DEV, and a rule on anything but a directory grants only
// the accesses that apply to a file (the kernel refuses the others there). A template's
// child's read-write grant is every handled access (landlockTemplateRW).
const (
	landlockHandledFS = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_FILE | unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR |
		unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO |
		unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK | unix.LANDLOCK_ACCESS_FS_MAKE_SYM | unix.LANDLOCK_ACCESS_FS_REFER |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	landlockFileFS = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	landlockRO         = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	landlockRW         = landlockHandledFS &^ (unix.LANDLOCK_ACCESS_FS_REFER | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV)
	landlockTemplateRW = landlockHandledFS
	// landlockScopes keep signals and abstract unix sockets inside the domain (ABI 6).
	landlockScopes = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
)

// LandlockRuleset is l assembled for a template's child (Spec.Template) to install as it is:
// the child makes the system calls and nothing else, so the policy stays here. Little-endian:
// the file accesses the ruleset handles (u64) and its scopes (u64), then one record per path,
// read-only ones first: the accesses granted when the path is a directory (u64), those when it
// is anything else (u64), the path's length (u16) and the path. The child adds a rule for each
// path it finds (after its own mounts: a rule on a mount point does not reach a filesystem
// mounted there later) and passes over one it does not, as installLandlock does with the
// helper's ruleset, which has this format too.
func LandlockRuleset(l *Landlock) []byte {
	return landlockRuleset(l, landlockTemplateRW)
}

func landlockRuleset(l *Landlock, rw uint64) []byte {
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
	add(l.ReadWrite, rw)
	return b
}

// landlockKnownFS is the file accesses Landlock ABI abi handles: REFER from ABI 2, TRUNCATE
// from 3, IOCTL_DEV from 5.
func landlockKnownFS(abi int) uint64 {
	known := uint64(landlockHandledFS)
	if abi < 5 {
		known &^= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	if abi < 3 {
		known &^= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi < 2 {
		known &^= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi < 1 {
		known = 0
	}
	return known
}

// applyLandlock confines the filesystem to l, and signals and abstract unix sockets to the
// sandbox's own domain where the kernel has scopes (ABI 6): no kill(-1) of another execution
// that shares the uid, no connection to a host daemon's abstract socket.
func applyLandlock(l *Landlock, bestEffort bool) error {
	return installLandlock(landlockRuleset(l, landlockRW), LandlockABI(), bestEffort)
}

// installLandlock installs ruleset (LandlockRuleset's format) on the calling thread, for a
// kernel of Landlock ABI abi: each access the ABI does not know is dropped, from what the
// ruleset handles and from each rule (so an older kernel gets what it can enforce); without
// bestEffort a ruleset that handles a file access the ABI lacks fails instead. Scopes are
// always best effort, dropped below ABI 6. A path that does not exist is passed over; a rule
// on anything but a directory gets its file accesses only. no_new_privs must be set already.
//
// landlock_restrict_self confines the calling thread only, and that is enough here: the
// helper runs on one locked OS thread (Main), which sets no_new_privs on itself (prctl is
// per-thread too), installs this, and is the thread that calls execve, whose new program
// inherits that thread's credentials (the Landlock domain among them) and no_new_privs, while
// execve ends every other thread. go-landlock applied both to every thread through psx (or
// TSYNC from ABI 8) for a Go program that keeps running; nothing of the helper that runs
// after this call needs the other threads confined, and the seccomp filter, installed after,
// still synchronises every thread (TSYNC).
func installLandlock(ruleset []byte, abi int, bestEffort bool) error {
	if len(ruleset) < 16 {
		return fmt.Errorf("landlock: a ruleset of %d bytes", len(ruleset))
	}
	handled := binary.LittleEndian.Uint64(ruleset)
	scoped := binary.LittleEndian.Uint64(ruleset[8:])
	known := landlockKnownFS(abi)
	if handled&^known != 0 && !bestEffort {
		return fmt.Errorf("landlock: missing kernel Landlock support. Got Landlock ABI v%d, wanted v%d", abi, landlockABIFor(handled))
	}
	handled &= known
	if abi < 6 {
		scoped = 0
	}
	if handled == 0 && scoped == 0 {
		return nil // nothing this kernel can restrict
	}
	// The attribute up to its scopes (ABI 6); an older kernel takes the larger size because
	// the fields it does not know are zero.
	attr := unix.LandlockRulesetAttr{Handled_access_fs: handled, Scoped: scoped}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)),
		unsafe.Offsetof(attr.Scoped)+unsafe.Sizeof(attr.Scoped), 0)
	if errno != 0 {
		return fmt.Errorf("landlock: landlock_create_ruleset: %v", errno)
	}
	defer unix.Close(int(fd))
	for rest := ruleset[16:]; len(rest) > 0; {
		if len(rest) < 18 || len(rest) < 18+int(binary.LittleEndian.Uint16(rest[16:])) {
			return fmt.Errorf("landlock: a ruleset cut short")
		}
		dirAccess, fileAccess := binary.LittleEndian.Uint64(rest), binary.LittleEndian.Uint64(rest[8:])
		n := 18 + int(binary.LittleEndian.Uint16(rest[16:]))
		path := string(rest[18:n])
		rest = rest[n:]
		if err := landlockAddPath(int(fd), path, dirAccess&handled, fileAccess&handled); err != nil {
			return fmt.Errorf("landlock: populating ruleset for %q: %v", path, err)
		}
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); errno != 0 {
		if errno == unix.E2BIG {
			return fmt.Errorf("landlock: the maximum number of stacked rulesets is reached for the current thread: %v", errno)
		}
		return fmt.Errorf("landlock: landlock_restrict_self: %v", errno)
	}
	return nil
}

// landlockAddPath adds the rule that grants dirAccess beneath path when it is a directory,
// fileAccess when it is anything else: one lookup of path, opened O_PATH, whose descriptor
// both says which and names it to the kernel. A path that does not exist, or grants nothing
// here, is passed over.
func landlockAddPath(ruleset int, path string, dirAccess, fileAccess uint64) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("fstat: %v", err)
	}
	access := fileAccess
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		access = dirAccess
	}
	if access == 0 {
		return nil
	}
	attr := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(fd)}
	if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&attr)), 0, 0, 0); errno != 0 {
		return fmt.Errorf("landlock_add_rule with access %#x: %v", access, errno)
	}
	return nil
}

// landlockABIFor is the first ABI that knows every file access of handled.
func landlockABIFor(handled uint64) int {
	for abi := 1; abi < 5; abi++ {
		if handled&^landlockKnownFS(abi) == 0 {
			return abi
		}
	}
	return 5
}
