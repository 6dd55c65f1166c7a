// Package spawned is what the local backends (process, namespaces, bwrap) share: the Options
// each one's own embed (and Tmpfs, which the container backend's embed too) and their
// resolution (Resolve: identities, interpreter, init helper, cgroup manager); the one list of
// read-only system paths and devices (SystemPaths, Devices); and, once their init helper is
// started, the adapter from an internal/spawn.Proc to engine.Child and the per-execution
// cgroup the helper joins. Each backend keeps only what differs: how it builds the
// containment, the facts it can claim, and where the host can read the workspace.
//
// It imports engine, failure, internal/spawn, internal/cgroup, internal/launch, internal/identity, internal/python, internal/owner and x/sys. A Child's methods
// are safe for concurrent use as engine.Child requires.
package spawned
