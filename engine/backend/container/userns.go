package container

import "strconv"

// Each execution of podman as root runs in a user namespace of its own: the container's ids
// 0-65535 map to a block of host ids no other execution holds while it runs, so no two
// executions (no two tenants) share a host uid, a keyring or a uid-wide kernel quota, and a
// process of one can reach nothing of another's as the same user. (--userns=auto would need an
// operator to give podman's "containers" user subordinate ranges; an explicit mapping needs
// nothing.) The image's layers are mapped by the storage driver, not copied.
//
// The blocks lie in usernsFirst…usernsFirst+usernsBlocks*usernsBlock, inside the range systemd
// sets aside for container ids (524288-1879048191) and above what useradd hands out as
// subordinate ids. A block is held by an flock on a file of its own in a directory every
// backend of this host shares (usernsDir), so servers of the host lease from one pool; the
// lock dies with its holder, so a killed server's blocks come free by themselves. An engine
// in a VM that runs as root there (a rootful Podman machine) gets the same, its blocks leased
// on this host, the one whose servers share that VM (userns_unix.go; Windows has no flock,
// and its executions run in the engine's namespace: userns_windows.go).
const (
	usernsFirst  = 0x6000_0000
	usernsBlock  = 1 << 16
	usernsBlocks = 4096
)

// usernsMap are the runtime's flags that map the container's ids 0-65535 to the block.
func usernsMap(first uint32) []string {
	m := "0:" + strconv.FormatUint(uint64(first), 10) + ":" + strconv.Itoa(usernsBlock)
	return []string{"--uidmap", m, "--gidmap", m}
}
