//go:build darwin

package launch

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// On macOS the helper is short: no cgroup, namespace, identity drop, Landlock or seccomp
// exists here (the seatbelt backend's confinement is the profile sandbox-exec applies, and
// Spec.Python is sandbox-exec). It checks that the host is still its parent, enters the
// workspace, sets the rlimits, marks every descriptor but 0-3 close-on-exec, and execs.
// The fields of Spec it does not apply must be unset; a Spec asking for one is refused
// rather than run with less.

// MaybeMain runs the helper and never returns when os.Args names Command; otherwise it
// returns at once. Call it first in main and in TestMain.
func MaybeMain() {
	if len(os.Args) > 1 && os.Args[1] == Command {
		Main()
	}
}

// Main runs the helper: it applies the Spec from SpecEnv and execs Spec.Python.
func Main() {
	runtime.LockOSThread()
	spec, err := ReadSpec()
	if err != nil {
		fail("reading the spec: %v", err)
	}
	if spec.Drop || spec.Landlock != nil || spec.DenyInet || spec.Seccomp || spec.SeccompHandOff || spec.Mounts != nil || spec.Reaper ||
		len(spec.CgroupProcs) > 0 || len(spec.CgroupTasksFDs) > 0 || spec.IDMapFD > 0 || spec.KillUID > 0 || spec.Rlimits.AS > 0 {
		fail("the spec asks for a mechanism macOS does not have")
	}
	if spec.ParentPID != 0 && os.Getppid() != spec.ParentPID {
		fail("the host is gone")
	}
	if err := unix.Chdir(spec.Dir); err != nil {
		fail("entering the workspace: %v", err)
	}
	r := spec.Rlimits
	nproc := r.NProc
	if nproc > 0 {
		// RLIMIT_NPROC counts every process of the uid: add what it runs already.
		procs, err := unix.SysctlKinfoProcSlice("kern.proc.uid", os.Geteuid())
		if err != nil {
			fail("counting the uid's processes: %v", err)
		}
		nproc += uint64(len(procs))
	}
	closeOnExec()
	cpuHard := max(r.CPUHard, r.CPUSeconds)
	for _, l := range []struct {
		name     string
		res      int
		cur, max uint64
	}{
		{"core", unix.RLIMIT_CORE, 0, 0}, {"cpu", unix.RLIMIT_CPU, r.CPUSeconds, cpuHard}, {"fsize", unix.RLIMIT_FSIZE, r.FSize, r.FSize},
		{"nproc", unix.RLIMIT_NPROC, nproc, nproc}, {"nofile", unix.RLIMIT_NOFILE, r.NoFile, r.NoFile},
	} {
		if l.cur == 0 && l.res != unix.RLIMIT_CORE {
			continue
		}
		if err := unix.Setrlimit(l.res, &unix.Rlimit{Cur: l.cur, Max: l.max}); err != nil {
			fail("setting RLIMIT_%s to %d: %v", l.name, l.cur, err)
		}
	}
	err = unix.Exec(spec.Python, spec.Argv, spec.Env)
	fail("exec %s: %v", spec.Python, err)
}

// closeOnExec marks every descriptor above the channel (fd 3) close-on-exec.
func closeOnExec() {
	var rl unix.Rlimit
	top := 1024
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil && rl.Cur < 1<<16 {
		top = int(rl.Cur)
	}
	for fd := 4; fd < top; fd++ {
		unix.CloseOnExec(fd)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "mcp-sandbox-init: "+format+"\n", args...)
	os.Exit(ExitSetupFailed)
}

// HasCapability is false where there are no Linux capabilities.
func HasCapability(int) bool { return false }
