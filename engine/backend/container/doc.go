// Package container is the isolated-level backend through a container runtime's CLI: podman
// or docker, found on PATH (podman first, and a runtime counts only when it answers) or named.
// It never pulls or builds an image: a missing one is a refusal that names the command to get
// it (`mcp-sandbox image build` builds localhost/mcp-sandbox-python from this host's Python).
//
// How one execution is run, the channel (a token socket, or the container's standard streams
// where no host socket reaches the container), cgroups, kills, the sweep of what a killed
// server left, and the runtimes' differences: docs/design.md §4.1.
//
// It imports engine, engine/backend/spawned (the tmpfs sizes), failure, internal/identity,
// internal/launch/seccomp (the seccomp policy), internal/spawn (the child's environment),
// internal/cgroup (the execution's cgroup parent, the layout and the sweep), internal/owner
// (its owner id and sweep), internal/tokenconn (the token socket's accept and token check),
// x/sys and the standard library. A Backend and its children are
// safe for concurrent use.
package container
