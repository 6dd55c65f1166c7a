// Package spawn is the host's side of one sandbox child, shared by the local backends: it
// starts the init helper (internal/launch) with a Spec, the channel on fd 3 and bounded
// copies of stdout and stderr, waits for it, kills its whole tree (process group, cgroup,
// exclusive uid, and — for a helper that is pid 1 of its own pid namespace — the namespace,
// which the kernel empties when its init dies), and cleans up afterwards.
//
// Output, built for every GOOS, is the pair of output pipes the macOS and Windows backends
// start their children with (seatbelt, jobobject), one home for both. The types here know
// nothing of the engine: a backend wraps a Proc into an engine.Child (Exit and Usage convert
// directly to engine.Exit and engine.TreeUsage).
//
// It imports the standard library, x/sys and internal/… only. Wait, Kill and Close are safe
// for concurrent use; Close is idempotent.
package spawn
