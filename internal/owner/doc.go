// Package owner names what a server leaves on the host while it runs (workspaces, root mount
// points, cgroups, containers and their socket directories) after the process that owns it,
// so that a later server can prove the owner dead and sweep what it left, and touch nothing
// else. It is the one such mechanism: every backend names its leftovers with Name and sweeps
// them with Sweep or DeadName.
//
// A Tag is "<pid>.<start>.<pidns>.<boot>": the owner's pid, its start time in clock ticks
// since boot (field 22 of /proc/<pid>/stat, which tells a reused pid apart), the inode of its
// pid namespace, and the first eight hex digits of the kernel's boot id. Its first use also
// takes the owner's lock: an exclusive flock, held until the process dies (the kernel drops it
// however it dies), on <tag>.lock in mcp-sandbox-owners-<euid> under the temporary directory
// (0700, this uid's). The file is locked before it is given its name (a rename), so no sweep
// finds a live owner's lock free. A lock directory another account made first, or one others
// may write, is not used: the lock proof is off, which LockDirProblem says (doctor prints it)
// and the first use of a tag logs as a warning.
//
// An owner is provably dead, and its leftovers swept, when
//   - its boot is not this one (a reboot ended every process); or
//   - it ran in this process's pid namespace (and /proc shows that namespace), and no process
//     has its pid and start time: here the pid decides, either way; or
//   - it ran in another pid namespace, where its pid means nothing here, and its lock file is
//     in our lock directory and free.
//
// The two proofs cover each other's blind spot, so neither is dropped. The lock works across
// pid namespaces (the test binaries' namespaces, a server in a container sharing the host's
// temporary directory) and is immune to pid reuse; but it lives in a file system a mount
// namespace may hide (the systemd unit's PrivateTmp: a restarted service has a new, empty
// /tmp, while its cgroups and containers are host-wide), and a missing lock file proves
// nothing. The pid and start time need no file at all, but only within one pid namespace.
// What may belong to another machine (a container runtime's containers: the daemon may be a
// remote one that servers elsewhere share) is judged by DeadNameThisBoot, for which another
// boot proves nothing. Anything a proof cannot settle is left alone: a name without a tag (older versions, other
// programs), an owner of another pid namespace whose lock is not in our lock directory (or
// is in one another account may write).
//
// Lock files are never removed by their owner (a process that exits cleanly has released its
// lock; its file then proves it dead). The first Sweep in a process prunes the lock files of
// dead owners that started over a day ago, unless another process did so within the hour (the
// mtime of .pruned in the lock directory says when): that only takes away one proof of a
// death already settled, for leftovers a day's sweeps did not reach, and the hour keeps a
// one-shot command from reading a day's worth of lock files before its child starts.
//
// Lock is the same proof for one open store that processes share (the SQLite run ledger): a
// flock on dir/<id>.lock held while the store is open; Claim finds a holder gone, and holds
// its lock while the caller settles what it left.
//
// The tags and sweeps are Linux only; Lock builds everywhere (where there is no flock every
// other holder is taken as gone). It imports the standard library only. Everything here is
// safe for concurrent use.
package owner
