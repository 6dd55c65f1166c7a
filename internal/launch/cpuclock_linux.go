//go:build linux

package launch

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// RLIMIT_CPU is checked against a process's CPUCLOCK_PROF clock: utime+stime as the
// scheduler tick samples them (each tick charges a whole tick to whoever is running at that
// moment). rusage, /proc/<pid>/stat, schedstat and a cgroup's usage all report the
// scheduler's precise runtime instead (rusage and stat scale the sampled times to it). Under
// load the two drift apart (sampling charges a program that runs through the ticks for the
// short tasks that ran between them): a program the kernel killed at a 2 s limit by its clock
// has been measured at 1.42 s of precise CPU time on a loaded 2-core machine. Only the
// kernel's own clock says whether the limit was reached, and it can be read for any process,
// a zombie too: so the helper's waiter reads it after the child has exited and before it
// reaps it.

// profClock is the clock id of pid's process CPU clock CPUCLOCK_PROF, built as the kernel's
// MAKE_PROCESS_CPUCLOCK does, (~pid << 3) | clock, where CPUCLOCK_PROF is 0 (so nothing is
// or'ed in); clock_getcpuclockid only gives the precise CPUCLOCK_SCHED.
func profClock(pid int) int32 { return int32((^pid) << 3) }

// RlimitCPUSeconds is pid's CPU time as RLIMIT_CPU counts it; ok is false when it cannot be
// read (the process is gone, or was never there).
func RlimitCPUSeconds(pid int) (seconds float64, ok bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(profClock(pid), &ts); err != nil {
		return 0, false
	}
	return float64(ts.Nano()) / 1e9, true
}

// ExitedCPU blocks until the child pid has exited, without reaping it, and returns its CPU
// time as RLIMIT_CPU counts it; ok is false when it could not be learnt. The caller reaps the
// child afterwards, as it would have without this (the zombie keeps its pid until then, so
// the clock read is the child's).
func ExitedCPU(pid int) (seconds float64, ok bool) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err == nil {
			return RlimitCPUSeconds(pid)
		}
		if err != unix.EINTR {
			return 0, false
		}
	}
}

// waitAny blocks until any child has exited, without reaping it, and returns its pid.
func waitAny() (int, error) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err == nil {
			return siginfoPid(&info), nil
		}
		if err != unix.EINTR {
			return 0, err
		}
	}
}

// siginfoPid is si_pid of a SIGCHLD siginfo: the union's first field, after si_signo,
// si_errno and si_code, aligned to the union's pointer alignment.
func siginfoPid(info *unix.Siginfo) int {
	off := uintptr(3 * 4)
	if unsafe.Sizeof(uintptr(0)) == 8 {
		off = 16
	}
	return int(*(*int32)(unsafe.Add(unsafe.Pointer(info), off)))
}
