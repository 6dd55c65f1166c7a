//go:build linux

package launch

import (
	"errors"
	"fmt"
	"slices"

	"golang.org/x/sys/unix"
)

// The securebits of linux/securebits.h (x/sys/unix does not name them).
const (
	secbitNoRoot              = 1 << 0
	secbitNoRootLocked        = 1 << 1
	secbitNoSetuidFixup       = 1 << 2
	secbitNoSetuidFixupLocked = 1 << 3
	secbitKeepCapsLocked      = 1 << 5
)

// lockCapabilities empties the bounding set and locks the securebits that would let uid 0
// (root inside a user namespace of its own, say) regain capabilities by exec: after it, only
// what the thread already holds remains, and clearCapabilities drops that. It needs
// CAP_SETPCAP; without it (an unprivileged host) there is nothing to lock and EPERM is fine.
func lockCapabilities() error {
	bits := secbitNoRoot | secbitNoRootLocked | secbitNoSetuidFixup | secbitNoSetuidFixupLocked | secbitKeepCapsLocked
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, uintptr(bits), 0, 0, 0); err != nil && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("securebits: %v", err)
	}
	return dropBounding(nil, true)
}

// dropBounding drops every capability but keep from the bounding set. Without CAP_SETPCAP
// a drop fails with EPERM, which mayLack tolerates.
func dropBounding(keep []int, mayLack bool) error {
	for c := 0; c < 64; c++ {
		if slices.Contains(keep, c) {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if errors.Is(err, unix.EINVAL) {
				break // past the last capability this kernel knows
			}
			if !mayLack || !errors.Is(err, unix.EPERM) {
				return fmt.Errorf("dropping capability %d from the bounding set: %v", c, err)
			}
		}
	}
	return nil
}

// TemplateCaps are the capabilities a template (Spec.Template) keeps, all of them over its own
// user namespace only: SYS_ADMIN for each child's namespaces and mounts, NET_ADMIN to bring up
// lo in a child's network namespace, SETUID and SETGID to drop a child to its identity.
var TemplateCaps = []int{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_SETUID, unix.CAP_SETGID}

// boundTemplate empties the bounding set but for TemplateCaps. Unlike lockCapabilities it
// leaves the securebits alone: the template is uid 0 of its user namespace and gets its
// capabilities through the exec of its interpreter.
func boundTemplate() error { return dropBounding(TemplateCaps, false) }

// clearCapabilities drops every capability the thread holds, ambient included. Dropping is
// always allowed. Capabilities belong to a thread: this one execs the interpreter.
func clearCapabilities() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clearing ambient capabilities: %v", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("clearing capabilities: %v", err)
	}
	return nil
}

// HasCapability reports whether this process holds capability c (unix.CAP_*) in its
// effective set. A root server under a narrowed bounding set (a systemd unit's
// CapabilityBoundingSet) may lack one it would otherwise hold; a failed read says false.
func HasCapability(c int) bool {
	if c < 0 || c >= 64 {
		return false
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[c/32].Effective&(1<<(uint(c)%32)) != 0
}
