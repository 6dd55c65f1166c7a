//go:build linux

package launch

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MaybeMain runs the helper and never returns when os.Args names Command; otherwise it
// returns at once. Call it first in main and in TestMain.
func MaybeMain() {
	if len(os.Args) > 1 && os.Args[1] == Command {
		Main()
	}
}

// Main runs the helper: it applies the Spec from SpecEnv and execs the interpreter.
func Main() {
	runtime.LockOSThread()
	spec, err := ReadSpec()
	if err != nil {
		fail("reading the spec: %v", err)
	}
	if spec.IDMapFD > 0 {
		awaitParent(spec.IDMapFD, "the host did not map the user namespace's ids")
	}
	if spec.Trial {
		os.Exit(0)
	}
	if spec.KillUID > 0 {
		killUID(spec.KillUID)
	}
	if spec.Reaper {
		os.Exit(reap(spec))
	}
	if spec.EgressFD > 0 {
		// A helper that execs a wrapper (bwrap) in a network namespace the host made for it,
		// or the first process of an init that holds no capability in its namespace (reap):
		// the listener is made here, while the helper still may bring lo up.
		if err := handEgressListener(spec.EgressFD, spec.EgressPort); err != nil {
			fail("the egress listener: %v", err)
		}
	}
	nproc, err := apply(&spec)
	if err != nil {
		fail("%v", err)
	}
	err = execLimited(&spec, nproc)
	fail("%v", err)
}

// awaitParent blocks until the parent says a step of its own is done (the user namespace's
// ids mapped): one byte on fd. Anything else fails with why.
func awaitParent(fd int, why string) {
	var b [1]byte
	n, err := unix.Read(fd, b[:])
	for err == unix.EINTR {
		n, err = unix.Read(fd, b[:])
	}
	unix.Close(fd)
	if n != 1 {
		fail("%s (%v)", why, err)
	}
}

// CgroupDir opens the directory of the one cgroup v2 group in procs (Spec.CgroupClone) for
// SysProcAttr.CgroupFD; the caller closes it once the child is started.
func CgroupDir(procs []string) (int, error) {
	if len(procs) != 1 {
		return -1, fmt.Errorf("starting a process inside its cgroup needs one cgroup v2 group, not %d", len(procs))
	}
	dir := procs[0][:strings.LastIndexByte(procs[0], '/')+1]
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("opening cgroup %s: %v", dir, err)
	}
	return fd, nil
}

// joinThread moves the calling thread into the group whose v1 tasks files fds are
// (Spec.CgroupTasksFDs), by writing 0 to each, and closes them: what this thread forks, or
// becomes by its exec, is born inside. The caller holds its thread locked.
func joinThread(fds []int) error {
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, fd := range fds {
		if _, err := unix.Write(fd, []byte("0")); err != nil {
			return fmt.Errorf("joining the execution's cgroup: %v", err)
		}
	}
	return nil
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "mcp-sandbox-init: "+format+"\n", args...)
	os.Exit(ExitSetupFailed)
}

// apply runs every step before the rlimits and returns the absolute RLIMIT_NPROC to set.
func apply(s *Spec) (uint64, error) {
	// This thread forks the program's first process (ExecsProgram) or becomes it by its
	// exec: it joins the group first (v1; on v2 this process was started inside).
	if err := joinThread(s.CgroupTasksFDs); err != nil {
		return 0, err
	}
	// A pids cgroup bounds the tree exactly; RLIMIT_NPROC, an absolute per-user count, is
	// the fallback without one. Then count the uid's tasks while still privileged (a /proc
	// scan that costs milliseconds, so only when it matters); the limits themselves are set
	// last, because the Go runtime of this helper needs more address space than a program
	// may get.
	nproc := s.Rlimits.NProc
	switch {
	case len(s.CgroupProcs) > 0:
		nproc = 0
	case nproc == 0 || s.UserNamespace:
	case s.Drop:
		nproc += uint64(tasksOf(s.UID))
	default:
		nproc += uint64(tasksOf(os.Geteuid()))
	}
	if s.Mounts != nil {
		if err := buildRoot(s.Mounts, s.UID, s.GID); err != nil {
			return 0, err
		}
	}
	if s.Template {
		if s.Drop {
			return 0, fmt.Errorf("a template keeps its identity: Drop must be false")
		}
		return 0, applyTemplate(s)
	}
	if err := lockCapabilities(); err != nil {
		return 0, err
	}
	// An init that starts the program itself (ExecsProgram) keeps its identity and the
	// capabilities it holds (the bounding set is empty now, so an exec gains none): its child
	// drops the identity (startProgram).
	if s.Drop && !s.ExecsProgram {
		if err := unix.Setgroups([]int{s.GID}); err != nil {
			return 0, fmt.Errorf("setgroups: %v", err)
		}
		if err := unix.Setresgid(s.GID, s.GID, s.GID); err != nil {
			return 0, fmt.Errorf("setgid %d: %v", s.GID, err)
		}
		if err := unix.Setresuid(s.UID, s.UID, s.UID); err != nil {
			return 0, fmt.Errorf("setuid %d: %v", s.UID, err)
		}
	}
	// Root inside a user namespace of its own keeps every capability there unless told not to.
	if !s.ExecsProgram {
		if err := clearCapabilities(); err != nil {
			return 0, err
		}
	}
	// The kernel clears the parent-death signal on a credential change: arm it again, then
	// check the parent did not die in between.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return 0, fmt.Errorf("parent-death signal: %v", err)
	}
	if s.ParentPID > 0 && os.Getppid() != s.ParentPID {
		return 0, fmt.Errorf("the host exited during setup")
	}
	if s.ChannelParent && channelHungUp() {
		return 0, fmt.Errorf("the host exited during setup")
	}
	if s.Dir != "" {
		if err := unix.Chdir(s.Dir); err != nil {
			return 0, fmt.Errorf("entering the workspace: %v", err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return 0, fmt.Errorf("no_new_privs: %v", err)
	}
	if s.Landlock != nil {
		if err := applyLandlock(s.Landlock, s.LandlockBestEffort); err != nil {
			return 0, err
		}
	}
	switch {
	case s.Seccomp && s.SeccompHandOff && len(s.Argv) > 0:
		fd, err := handFilterOn(s.Filter)
		if err != nil {
			return 0, err
		}
		s.keepFD = fd
		s.Argv = append([]string{s.Argv[0], "--seccomp", strconv.Itoa(fd)}, s.Argv[1:]...)
	case s.Seccomp || s.DenyInet:
		if err := installFilter(s.Filter); err != nil {
			return 0, err
		}
	}
	return nproc, nil
}

// applyTemplate is apply's end for Spec.Template: the bounding set narrowed to TemplateCaps,
// no_new_privs, and the template's Filter (seccomp.TemplatePolicy).
func applyTemplate(s *Spec) error {
	if err := boundTemplate(); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("parent-death signal: %v", err)
	}
	if s.ChannelParent && channelHungUp() {
		return fmt.Errorf("the host exited during setup")
	}
	if s.Dir != "" {
		if err := unix.Chdir(s.Dir); err != nil {
			return fmt.Errorf("entering the workspace: %v", err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %v", err)
	}
	if s.Seccomp || s.DenyInet {
		return installFilter(s.Filter)
	}
	return nil
}

// execLimited sets the rlimits and execs the interpreter with raw system calls only: once the
// address-space limit is in force, this Go process must not allocate, or its runtime could
// fail before the interpreter starts. Everything execve needs is converted beforehand.
func execLimited(s *Spec, nproc uint64) error {
	if s.StdioChannel {
		// A contained stdio server: the channel is its stdin and stdout, fd 3 nothing.
		for _, fd := range []int{0, 1} {
			if err := unix.Dup2(3, fd); err != nil {
				return fmt.Errorf("dup2 the channel to %d: %v", fd, err)
			}
		}
		unix.Close(3)
	}
	path, err := syscall.BytePtrFromString(s.Python)
	if err != nil {
		return err
	}
	argv, err := syscall.SlicePtrFromStrings(s.Argv)
	if err != nil {
		return err
	}
	envv, err := syscall.SlicePtrFromStrings(s.Env)
	if err != nil {
		return err
	}
	limits := s.limits(nproc)
	for i := range limits {
		if err := limits[i].set(); err != nil {
			return err
		}
	}
	if err := closeOnExec(s.keepFD); err != nil {
		return err
	}
	_, _, e := unix.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(path)), uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])))
	return fmt.Errorf("exec %s: %v", s.Python, e)
}

// rlimit is one limit the program runs under.
type rlimit struct {
	res  int
	name string
	v    uint64 // 0: none, but for CORE
	rl   unix.Rlimit
}

// limits are the rlimits Spec.Rlimits (and the absolute RLIMIT_NPROC apply computed) ask for.
func (s *Spec) limits(nproc uint64) []rlimit {
	r := s.Rlimits
	limits := []rlimit{{unix.RLIMIT_CORE, "CORE", 0, unix.Rlimit{}}, {unix.RLIMIT_CPU, "CPU", r.CPUSeconds, unix.Rlimit{}},
		{unix.RLIMIT_AS, "AS", r.AS, unix.Rlimit{}}, {unix.RLIMIT_FSIZE, "FSIZE", r.FSize, unix.Rlimit{}},
		{unix.RLIMIT_NPROC, "NPROC", nproc, unix.Rlimit{}}, {unix.RLIMIT_NOFILE, "NOFILE", r.NoFile, unix.Rlimit{}}}
	for i := range limits {
		limits[i].rl = unix.Rlimit{Cur: limits[i].v, Max: limits[i].v}
	}
	if r.CPUHard > r.CPUSeconds && r.CPUSeconds > 0 {
		limits[1].rl.Max = r.CPUHard
	}
	out := limits[:0]
	for _, l := range limits {
		if l.v != 0 || l.res == unix.RLIMIT_CORE {
			out = append(out, l)
		}
	}
	return out
}

// set sets the limit on this process with a raw system call (no allocation: see execLimited).
func (l *rlimit) set() error {
	if _, _, e := unix.RawSyscall6(unix.SYS_PRLIMIT64, 0, uintptr(l.res), uintptr(unsafe.Pointer(&l.rl)), 0, 0, 0); e != 0 {
		return fmt.Errorf("setting RLIMIT_%s to %d: %v", l.name, l.v, e)
	}
	return nil
}

// closeOnExec marks every descriptor but stdio and the channel (and keep, the policy handed
// on, when positive) close-on-exec. CLOEXEC rather than close: the Go runtime still owns some
// of these descriptors until execve.
func closeOnExec(keep int) error {
	ranges := [][2]uintptr{{4, ^uintptr(0)}}
	if keep > 0 {
		ranges = [][2]uintptr{{4, uintptr(keep) - 1}, {uintptr(keep) + 1, ^uintptr(0)}}
	}
	for _, r := range ranges {
		if r[0] > r[1] {
			continue
		}
		if _, _, e := unix.RawSyscall(unix.SYS_CLOSE_RANGE, r[0], r[1], unix.CLOSE_RANGE_CLOEXEC); e != 0 {
			return fmt.Errorf("close_range: %v", e)
		}
	}
	return nil
}

// tasksOf counts the tasks (threads included, as RLIMIT_NPROC does) the uid already runs.
func tasksOf(uid int) int {
	d, err := os.Open("/proc")
	if err != nil {
		return 0
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	n := 0
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		var st unix.Stat_t
		if unix.Stat("/proc/"+name, &st) != nil || int(st.Uid) != uid {
			continue
		}
		tasks, err := os.ReadDir("/proc/" + name + "/task")
		if err != nil {
			n++
			continue
		}
		n += len(tasks)
	}
	return n
}

// killUID becomes uid and kills every process it owns. Only for an exclusive sandbox uid.
func killUID(uid int) {
	if err := unix.Setresuid(uid, uid, uid); err != nil {
		fail("becoming uid %d to kill its processes: %v", uid, err)
	}
	for i := 0; i < 16; i++ {
		if err := syscall.Kill(-1, syscall.SIGKILL); err != nil {
			break // ESRCH: nothing of that uid is left
		}
	}
	os.Exit(0)
}
