// Package launch is the sandbox init helper: the host execs a binary that holds it with the
// hidden subcommand Command (the helper alone, which mcp-sandbox embeds and writes to a file,
// internal/inithelper; or the host's own binary), and that short-lived
// process applies everything that Go cannot apply race-free to a child from the parent
// (rlimits, cgroup membership, the identity drop, no_new_privs, Landlock, seccomp, closing
// inherited descriptors) and then execs the interpreter in its own place. The dispatch is this package's initialiser (early.go), which Go
// runs once launch's own imports are initialised, before the many packages only the server
// needs: their initialisers were most of a child's start. So launch keeps its imports few
// (path, not path/filepath, which is initialised late). main and TestMain call MaybeMain too.
//
// The helper reads its Spec from the environment variable SpecEnv, and its one long argument
// (the compiled bootstrap) from ArgEnv beside it (Spec.Environ, ReadSpec); neither reaches the
// interpreter: the interpreter's environment is Spec.Env, built by the backend from nothing.
// A setup step that fails ends the helper with exit status ExitSetupFailed and one line on
// stderr starting "mcp-sandbox-init: "; nothing of the program has run by then.
//
// The order matters and is fixed: join the cgroup (on cgroup v2, Spec.CgroupClone, the
// process that starts the helper starts it inside the group, with no join at all; on v1 the
// helper's thread joins through the group's tasks files the host opened, Spec.CgroupTasksFDs,
// which skips the kernel lock whose first taking waits a grace period), count the uid's tasks, build the
// private root and pivot into it when Spec.Mounts is set (the namespaces backend; the host's
// /proc is still visible for the count), drop the identity, re-arm the parent-death signal (the kernel clears it on a uid change), enter the
// workspace, set no_new_privs, Landlock, the seccomp policy (Spec.Filter, the one every backend applies, which the host
// assembles in internal/launch/seccomp: for bwrap the helper hands it on instead, since bwrap makes the namespaces it
// refuses), then the rlimits (last, because this Go
// helper itself needs more address space than a program may get), mark every descriptor but
// 0-3 close-on-exec, exec. It runs on one locked OS thread, because no_new_privs, Landlock
// and the identity must hold on the thread that calls execve: the helper makes Landlock's
// system calls itself (landlock_linux.go), for that thread only, and the new program inherits
// them from it.
//
// With Spec.Reaper the helper is a pid namespace's init instead: it starts itself again as
// pid 2 (which does all of the above; this init starts it inside the cgroup or hands it the
// tasks files, and stays outside itself), or, with ExecsProgram (root), confines itself and
// starts the interpreter as pid 2 from the thread that joined the group, whose -c source sets the rlimits first; it reaps orphans, and reports pid 2's wait status and CPU
// time on StatusFD before it exits and so ends the namespace. The CPU time includes the clock
// RLIMIT_CPU is checked against, read from the zombie before it is reaped (cpuclock_linux.go):
// rusage alone cannot tell a CPU-limit kill from any other SIGKILL. Inside a pid namespace getppid
// is 0, so pid 2 checks that the host still holds the channel (Spec.ChannelParent) instead of
// comparing ParentPID.
//
// A template's children (Spec.Template) install their confinement themselves, from what this
// package builds: the seccomp program (seccomp.TemplateChildBytes, stacked on the template's own) and the Landlock ruleset
// (LandlockRuleset, landlock_linux.go), which they only hand to the kernel.
//
// It imports the standard library and x/sys only, never internal/launch/seccomp,
// go-seccomp-bpf or go-landlock: a binary of this package alone starts in 0.12× a bare
// interpreter start's CPU (docs/design.md §19.1).
package launch
