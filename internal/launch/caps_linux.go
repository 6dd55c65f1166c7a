//go:build linux

package launch

import (
	"errors"
	"fmt"

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
	for c := 0; c < 64; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if errors.Is(err, unix.EINVAL) {
				break // past the last capability this kernel knows
			}
			if !errors.Is(err, unix.EPERM) {
				return fmt.Errorf("dropping capability %d from the bounding set: %v", c, err)
			}
		}
	}
	return nil
}

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
