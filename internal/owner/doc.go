// Package owner names what a server leaves on the host while it runs (workspaces, root mount
// points, cgroups) after the process that owns it, so that a later server can prove the owner
// dead and sweep what it left, and touch nothing else.
//
// A Tag is "<pid>.<start>.<pidns>.<boot>": the owner's pid, its start time in clock ticks
// since boot (field 22 of /proc/<pid>/stat, which tells a reused pid apart), the inode of its
// pid namespace, and the first eight hex digits of the kernel's boot id. An owner is provably
// dead when its boot is not this one (a reboot ended every process), or when it ran in this
// process's pid namespace (and /proc shows that namespace) and /proc has no process with its
// pid and start time. An owner in another pid namespace cannot be checked from here and is
// never swept; nor is a name without a tag (older versions, other programs).
//
// Linux only (elsewhere the package is empty). It imports the standard library only. Everything here is safe for concurrent use.
package owner
