// Package cgroup gives each execution its own cgroup: a memory limit over the whole tree, a
// pids limit, and a kill that reaches every process in it, setsid and double fork included.
// It speaks cgroup v2 (cgroup.kill, memory.events, pids.events) and the v1 memory and pids
// hierarchies (a kill loop bounded by pids.max, memory.oom_control, pids.events).
//
// A Manager is found once by Detect; a Group is created per execution, joined by the init
// helper writing its own pid to ProcsFiles before it execs, and removed by Remove. It imports
// the standard library only. A Group's methods are safe for concurrent use.
package cgroup
