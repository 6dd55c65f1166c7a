// Package seccomp assembles the sandbox's seccomp policy (Policy): as a classic BPF program
// for the init helper (Filter) and a template's children (TemplateChildBytes), which only install the bytes it is given or
// hands them on to bwrap, and as the JSON profile a container runtime takes (OCIProfile).
// It runs in the host, never in the helper: go-seccomp-bpf's syscall tables are the largest
// package initialiser the helper's start would otherwise run (docs/design.md §19.1), and
// internal/launch must not import this package (the repository's meta test says so).
//
// Each variant is assembled once and then shared read-only, so every function is safe for
// concurrent use.
//
// It imports the standard library, x/sys and go-seccomp-bpf.
package seccomp
