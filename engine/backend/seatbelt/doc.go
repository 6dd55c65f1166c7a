// Package seatbelt is the macOS backend: each child runs under a Seatbelt profile generated
// for its execution and applied by sandbox-exec, the way Codex CLI, Bazel and Chromium
// confine their children on macOS.
//
// The profile (profile.go) denies by default; it allows reading the interpreter, its
// libraries and the read-only paths, reading and writing the workspace and its temporary
// directory only, the network only when the terms grant it, and signals and process
// information inside the child's own sandbox only. Profile and Args are pure functions without
// a build tag, so the profile for default terms is a golden file (testdata) that a test on
// Linux parses and checks rule by rule.
//
// On darwin (seatbelt_darwin.go) the host re-executes its own binary as the init helper
// (internal/launch), which sets the rlimits (CPU, file size, open files, process count; soft
// = hard but for the CPU grace) and execs sandbox-exec with the profile, which execs the
// interpreter: the limits are in force before the first instruction of the program. The child
// leads a process group of its own and has the channel as fd 3, a socketpair, as on Linux.
// Kill sends SIGKILL to the group and then sweeps the uid's processes for strays: every
// process descending from the child or left in its group (setsid and a double fork whose
// middle process has exited escape it, so process_tree is graded unavailable).
//
// Grades are the specification's for macOS: filesystem unverified (the profile confines
// reads, but a canary cannot prove the confinement), memory unavailable (macOS has no memory
// cap a child could be held to; Facts.NoMemoryCap lets the process level run without it), no
// identity of its own (the child is the user's uid). The isolated level is refused, with
// IsolatedWhy, before anything starts.
//
// It imports engine, failure, internal/… and x/sys. A Backend is safe for concurrent use.
package seatbelt
