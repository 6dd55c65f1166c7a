//go:build linux

package launch

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// reap is pid 1 of a fresh pid namespace, or (Spec.Subreaper) the child subreaper of the
// program's tree. It stays as it was started (root of its namespaces, or the host's own
// user) and outside the cgroup, so the program, once dropped to the sandbox identity, can
// neither signal it nor count it against its limits; it holds none of the program's
// descriptors. A signal the program sends it is refused (EPERM), as for any other process
// the program does not own.
func reap(spec Spec) int {
	// Not dumpable: a program of the same uid (an unprivileged host's user namespace) must not
	// open this init's descriptors through /proc and forge the status it reports.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fail("prctl(PR_SET_DUMPABLE): %v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		fail("finding the helper binary: %v", err)
	}
	if spec.Subreaper {
		return subreap(spec, exe)
	}
	// Stand on the old root so pid 2's pivot_root moves this init into the new one too: a
	// working directory left in the host's tree would keep that tree reachable through
	// /proc/1/cwd after the host's root is detached.
	if err := unix.Chdir("/"); err != nil {
		fail("chdir /: %v", err)
	}
	// The egress listener needs lo brought up, so CAP_NET_ADMIN over the namespace. A helper
	// whose user namespace was mapped after it started (newuidmap, subordinate ids) was exec'd
	// unmapped and holds no capability there: its first process, exec'd once the maps are
	// written, holds them all and makes the listener before anything else (main), as the
	// bwrap helper does; this init keeps no copy of the socket either way.
	if spec.EgressFD > 0 && HasCapability(unix.CAP_NET_ADMIN) {
		if err := handEgressListener(spec.EgressFD, spec.EgressPort); err != nil {
			fail("the egress listener: %v", err)
		}
		spec.EgressFD = 0
	}
	first := 0
	if spec.ExecsProgram {
		nproc, err := apply(&spec)
		if err != nil {
			fail("%v", err)
		}
		if first, err = startProgram(&spec, nproc); err != nil {
			fail("starting the interpreter: %v", err)
		}
	} else {
		first = startFirst(spec, exe, false)
	}
	st, ok := waitFor(first, nil, false)
	if !ok {
		return ExitSetupFailed
	}
	return report(st)
}

// startProgram starts the interpreter as this init's only child (Spec.ExecsProgram), its
// confinement applied to this process already: Go's fork and exec drops the child to UID and
// GID and arms its parent-death signal. The rlimits are the interpreter's own first
// statements (limitedSource), since this init can take them on for the fork only with
// CAP_SYS_RESOURCE, which a root host may lack, and its Go runtime cannot live under them
// (RLIMIT_AS is below what it maps). Then this init lets go of the program's streams and
// channel, as startFirst does.
func startProgram(s *Spec, nproc uint64) (int, error) {
	argv, err := limitedSource(s.Argv, s.limits(nproc))
	if err != nil {
		return 0, err
	}
	if err := closeOnExec(0); err != nil {
		return 0, err
	}
	sys := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if s.Drop {
		sys.Credential = &syscall.Credential{Uid: uint32(s.UID), Gid: uint32(s.GID), Groups: []uint32{uint32(s.GID)}}
	}
	pid, err := syscall.ForkExec(s.Python, argv, &syscall.ProcAttr{Dir: s.Dir, Env: s.Env, Files: []uintptr{0, 1, 2, 3}, Sys: sys})
	if err != nil {
		return 0, err
	}
	letGo()
	return pid, nil
}

// limitedSource is argv, an interpreter's started with -c, with the source after -c setting
// limits first: after its first line (the bootstrap's, which tests find processes by), the
// resource module's setrlimit of each. Nothing of the program runs before them: it comes
// later, on the channel, and the probe reports the limits the host grades.
func limitedSource(argv []string, limits []rlimit) ([]string, error) {
	i := slices.Index(argv, "-c")
	if i < 1 || i+1 >= len(argv) {
		return nil, fmt.Errorf("the interpreter is not started with -c: its rlimits cannot be its first statements")
	}
	var b strings.Builder
	b.WriteString("import resource as _r\n")
	for _, l := range limits {
		fmt.Fprintf(&b, "_r.setrlimit(%d, (%d, %d))\n", l.res, l.rl.Cur, l.rl.Max)
	}
	b.WriteString("del _r\n")
	first, rest, _ := strings.Cut(argv[i+1], "\n")
	out := slices.Clone(argv)
	out[i+1] = first + "\n" + b.String() + rest
	return out, nil
}

// letGo points this init's descriptors 0-2 at /dev/null and closes the channel (fd 3): the
// host sees the program's streams and channel end when its last process lets go of them,
// not when this init does.
func letGo() {
	if null, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0); err == nil {
		for _, fd := range []int{0, 1, 2} {
			_ = unix.Dup2(null, fd)
		}
		unix.Close(null)
	}
	unix.Close(3)
}

// startFirst starts the helper again, without Reaper, as the program's first process (pid 2
// of a namespace), and lets go of the program's streams and channel: the host sees their end
// when the program's last process lets go of them, not when this init does.
func startFirst(spec Spec, exe string, setsid bool) int {
	egress := spec.EgressFD // the listener is still to make (reap): the first process makes it
	spec.Reaper, spec.Subreaper, spec.IDMapFD, spec.EgressFD = false, false, 0, 0
	if setsid {
		spec.ParentPID = os.Getpid() // its parent is this init, not the host
	}
	files := []uintptr{0, 1, 2, 3}
	if egress > 0 {
		spec.EgressFD = len(files)
		files = append(files, uintptr(egress))
	}
	// This init starts the first process inside its cgroup (Spec.CgroupClone, v2) or hands it
	// the group's tasks files, which it joins first thing (Spec.CgroupTasksFDs, v1), and
	// stays outside itself.
	sys := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setsid: setsid}
	if spec.CgroupClone {
		fd, err := CgroupDir(spec.CgroupProcs)
		if err != nil {
			fail("%v", err)
		}
		defer unix.Close(fd)
		sys.UseCgroupFD, sys.CgroupFD = true, fd
	}
	tasks := spec.CgroupTasksFDs
	spec.CgroupTasksFDs = nil
	for _, fd := range tasks {
		spec.CgroupTasksFDs = append(spec.CgroupTasksFDs, len(files))
		files = append(files, uintptr(fd))
	}
	pid, err := syscall.ForkExec(exe, []string{exe, Command}, &syscall.ProcAttr{
		Env:   spec.Environ(),
		Files: files,
		Sys:   sys,
	})
	if err != nil {
		fail("starting the sandbox's first process: %v", err)
	}
	if egress > 0 {
		unix.Close(egress)
	}
	for _, fd := range tasks {
		unix.Close(fd)
	}
	letGo()
	return pid
}

// waitFor reaps children, blocking, and returns the status of first: as soon as first ends,
// or (untilEmpty) once no child at all is left, with Emptied set. st is first's status when
// it was reaped already. ok is false when waiting failed.
func waitFor(first int, st *Status, untilEmpty bool) (_ Status, ok bool) {
	for {
		// Learn which child exited before reaping it: the first process's CPU clock can be
		// read only while it is a zombie (cpuclock_linux.go).
		got, err := waitAny()
		if err == unix.ECHILD && untilEmpty && st != nil {
			st.Emptied = true
			return *st, true
		}
		if err != nil {
			return Status{}, false
		}
		s, err := reapExited(got, got == first)
		if err != nil {
			return Status{}, false
		}
		if got == first {
			if st = &s; !untilEmpty {
				return s, true
			}
		}
	}
}

// reapExited reaps pid, which has exited, and returns its status; with clock, first its CPU
// time as RLIMIT_CPU counts it, read from the zombie.
func reapExited(pid int, clock bool) (Status, error) {
	var rlimitCPU float64
	if clock {
		rlimitCPU, _ = RlimitCPUSeconds(pid)
	}
	var ws syscall.WaitStatus
	var ru syscall.Rusage
	for {
		_, err := syscall.Wait4(pid, &ws, 0, &ru)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return Status{}, err
		}
		break
	}
	st := Status{Code: ws.ExitStatus(), CPUSeconds: tv(ru.Utime) + tv(ru.Stime), RlimitCPU: rlimitCPU}
	if ws.Signaled() {
		st.Code, st.Signal = -1, int(ws.Signal())
	}
	return st, nil
}

// report writes st on StatusFD and returns the exit status that mirrors it.
func report(st Status) int {
	b, _ := json.Marshal(st)
	_, _ = unix.Write(StatusFD, b)
	if st.Signal != 0 {
		return 128 + st.Signal
	}
	return st.Code
}

// subreap is the tree's child subreaper on a host without a cgroup or a pid namespace. Until
// the first process ends or the host asks (SIGTERM: the host's Kill, or the parent-death
// signal when the host dies) it reaps whatever ends. Then it kills: every live child it has,
// and the process group each one leads, round after round as the children of the killed are
// handed to it, until every child it has is a zombie; only then does it reap them and report.
// Not reaping while it kills is what makes the kill finish: a zombie keeps its slot under
// RLIMIT_NPROC, so a fork bomb cannot refill the slots the kill frees, and a pid it found
// cannot be reused by another process before its signal is sent.
func subreap(spec Spec, exe string) int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fail("prctl(PR_SET_CHILD_SUBREAPER): %v", err)
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGTERM), 0, 0, 0); err != nil {
		fail("parent-death signal: %v", err)
	}
	if spec.ParentPID > 0 && os.Getppid() != spec.ParentPID {
		fail("the host exited during setup")
	}
	first := startFirst(spec, exe, true)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var st *Status
	for killing := false; !killing; {
		for {
			got, err := peekExited()
			if err != nil || got <= 0 {
				break
			}
			s, err := reapExited(got, got == first)
			if err != nil {
				break
			}
			if got == first {
				st, killing = &s, true
			}
		}
		if !killing {
			select {
			case s := <-sigs:
				killing = s == syscall.SIGTERM
			case <-tick.C:
			}
		}
	}
	if st == nil {
		// The first process is not reaped yet, so its pid still names its process group.
		_ = syscall.Kill(-first, syscall.SIGKILL)
	}
	for killChildren() > 0 {
		select {
		case <-sigs:
		case <-tick.C:
		}
	}
	final, ok := waitFor(first, st, true)
	if !ok {
		return ExitSetupFailed
	}
	return report(final)
}

// peekExited returns a child that has exited, without reaping it, or 0 when none has.
func peekExited() (int, error) {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		return siginfoPid(&info), nil
	}
}

// killChildren sends SIGKILL to every live child of this process, found by their parent pid
// in /proc, and to the process group each one leads (a group whose leader is alive cannot
// be another's), and returns how many it found alive.
func killChildren() int {
	d, err := os.Open("/proc")
	if err != nil {
		return 0
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	self := strconv.Itoa(os.Getpid())
	var buf [1024]byte
	live := 0
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		fd, err := unix.Open("/proc/"+name+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		n, _ := unix.Read(fd, buf[:])
		unix.Close(fd)
		if n <= 0 {
			continue
		}
		// pid (comm) state ppid ...: comm may hold anything, so read after its last ')'.
		line := string(buf[:n])
		i := strings.LastIndexByte(line, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(line[i+1:])
		if len(f) < 2 || f[0] == "Z" || f[0] == "X" || f[1] != self {
			continue
		}
		if pid, err := strconv.Atoi(name); err == nil {
			live++
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return live
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
