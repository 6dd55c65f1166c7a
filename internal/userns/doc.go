// Package userns holds what an unprivileged host needs to know about user namespaces: whether
// this kernel lets an ordinary user make one, and when it does not, the exact setting that
// forbids it and the command that changes it (Blocked); and the user's subordinate id range
// (/etc/subuid, /etc/subgid) with the setuid newuidmap and newgidmap that map it into a
// namespace the user made (Subordinate, SubIDs.Map, and SubIDs.MapRanges for a block of the ranges), which is how a sandbox started without
// root still runs as a uid of its own, as rootless podman does.
//
// Every path it reads is a field of Host, so tests stand in for a host with blocked settings
// or another user's ranges by pointing it at a directory of their own; the zero Host reads
// the real ones. It imports the standard library only. A Host is a value; its methods are
// safe for concurrent use.
package userns
