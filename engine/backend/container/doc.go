// Package container is the isolated-level backend through a container runtime's CLI: podman
// or docker, found on PATH (podman first, and a runtime counts only when it answers) or named.
// It never pulls or builds an image: a missing one is a refusal that names the command to get
// it (`mcp-sandbox image build` builds localhost/mcp-sandbox-python from this host's Python).
//
// It builds on Linux, macOS and Windows. An engine on this Linux host gets a token socket, an
// execution cgroup, the interpreter's pid (host_linux.go and the other _linux files); an engine
// elsewhere (Docker Desktop's or a Podman machine's VM, a remote daemon, and every engine off
// Linux) gets the same run with nothing of this host in it: the channel over the container's
// standard streams, the limits graded from the probe inside, an OOM kill and the workspace
// read through the engine (inspect, exec), the seccomp profile placed where the engine reads
// it. How one execution is run, the channel, cgroups, kills, the sweep of what a killed server
// left, and the runtimes' differences: docs/design.md §4.1; an engine elsewhere: §4.5.
//
// It imports engine, engine/backend/spawned (the tmpfs sizes), failure, internal/identity,
// internal/launch/seccomp (the seccomp policy), internal/spawn (the child's environment),
// internal/tokenconn (the token socket's accept and token check), internal/cgroup (on Linux,
// the execution's cgroup parent, the layout and the sweep), internal/owner (on Linux, its
// owner id and sweep), x/sys and the standard library. A Backend and its children are safe
// for concurrent use.
package container
