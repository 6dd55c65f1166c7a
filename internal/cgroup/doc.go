// Package cgroup gives each execution its own cgroup: a memory limit over the whole tree, a
// pids limit, and a kill that reaches every process in it, setsid and double fork included.
// It speaks cgroup v2 (cgroup.kill, memory.events, pids.events) and the v1 memory and pids
// hierarchies (a kill loop bounded by pids.max, memory.oom_control, pids.events). It is the
// one home of cgroups: every local backend's execution cgroup is made here, under Base.
//
// A Manager is found once by Detect; a Group is created per execution, entered by the program's
// first process before it execs (on v2 with StartsInside it is started inside, by clone3's
// CLONE_INTO_CGROUP; on v1 an exec'd helper's thread joins by the group's tasks files, and a
// template's child by its pid written to ProcsFiles, Join), and removed by
// Remove (or RemoveEvents, which answers its Events from the read a kept group needs). For a
// container runtime, which makes the container's own cgroup, a Parent is the cgroup it nests
// the container under (NewParent; its CPU, OOM kills and kill skip the runtime's monitor), and
// DetectLayout says which layout the host has (crun refuses a hybrid one). It imports the
// standard library only. A Group's methods are safe for concurrent use, as are a Parent's
// NoteOOM and OOMKills.
package cgroup
