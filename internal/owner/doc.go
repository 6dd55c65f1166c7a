// Package owner holds every flock of the product (docs/design.md §6.9): a lock the kernel
// drops when its holder dies, however it dies, proves what each use needs.
//
//   - Owners. Name tags what a server leaves on the host while it runs (workspaces, root
//     mount points, cgroups, containers and their socket directories) with its owner's Tag,
//     "<pid>.<start>.<pidns>.<boot>", whose first use also takes the owner's lock (an
//     exclusive flock on <tag>.lock in mcp-sandbox-owners-<euid> under the temporary
//     directory, held until the process dies). A later server proves the owner dead (its
//     boot is not this one; its pid and start time are gone from this pid namespace; or,
//     from another pid namespace, its lock is free) and Sweep, DeadName or DeadNameThisBoot
//     sweeps what it left, and touches nothing else: what no proof settles is left alone.
//     Every backend names its leftovers so. LockDirProblem says when the lock directory
//     cannot be used (doctor prints it).
//   - A store's liveness. Hold is a flock on dir/<id>.lock held while a store that processes
//     share (the SQLite run ledger) is open; Claim finds a holder gone, and holds its lock
//     while the caller settles what it left.
//   - Leases. Lease takes one of n slots of a directory that a host's servers share (the
//     container backend's blocks of host ids), each an exclusive flock; release or death
//     frees it.
//   - Files in use. Share takes a shared flock on a file (the init helper's file and its
//     directory), Keep holds it for the process's life, and RemoveUnheld removes such a file
//     only when no process holds it.
//
// The tags and sweeps are Linux only. Hold and Claim build everywhere (where there is no
// flock every other holder is taken as gone); Lease, Share and Keep fail there instead, since
// what they promise needs the lock. It imports x/sys (a close-on-exec descriptor for Keep).
// Everything here is safe for concurrent use.
package owner
