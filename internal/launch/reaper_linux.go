//go:build linux

package launch

import (
	"encoding/json"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// reap is pid 1 of a fresh pid namespace. It stays as it was started (root of its
// namespaces) and outside the cgroup, so the program, once dropped to the sandbox identity,
// can neither signal it nor count it against its limits; it holds none of the program's
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
	// Stand on the old root so pid 2's pivot_root moves this init into the new one too: a
	// working directory left in the host's tree would keep that tree reachable through
	// /proc/1/cwd after the host's root is detached.
	if err := unix.Chdir("/"); err != nil {
		fail("chdir /: %v", err)
	}
	spec.Reaper = false
	js, _ := json.Marshal(&spec)
	pid, err := syscall.ForkExec(exe, []string{exe, Command}, &syscall.ProcAttr{
		Env:   []string{SpecEnv + "=" + string(js)},
		Files: []uintptr{0, 1, 2, 3},
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		fail("starting the sandbox's first process: %v", err)
	}
	// Let go of the program's streams and channel: the host sees their end when the
	// program's last process lets go of them, not when this init does.
	if null, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0); err == nil {
		for _, fd := range []int{0, 1, 2} {
			_ = unix.Dup2(null, fd)
		}
		unix.Close(null)
	}
	unix.Close(3)
	for {
		// Learn which child exited before reaping it: pid 2's CPU clock can be read only
		// while it is a zombie (cpuclock_linux.go).
		got, err := waitAny()
		if err != nil {
			return ExitSetupFailed
		}
		var rlimitCPU float64
		if got == pid {
			rlimitCPU, _ = RlimitCPUSeconds(pid)
		}
		var ws syscall.WaitStatus
		var ru syscall.Rusage
		for {
			if _, err = syscall.Wait4(got, &ws, 0, &ru); err != syscall.EINTR {
				break
			}
		}
		if err != nil {
			return ExitSetupFailed
		}
		if got != pid {
			continue
		}
		st := Status{Code: ws.ExitStatus(), CPUSeconds: tv(ru.Utime) + tv(ru.Stime), RlimitCPU: rlimitCPU}
		if ws.Signaled() {
			st.Code, st.Signal = -1, int(ws.Signal())
		}
		b, _ := json.Marshal(st)
		_, _ = unix.Write(StatusFD, b)
		if st.Signal != 0 {
			return 128 + st.Signal
		}
		return st.Code
	}
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
