//go:build linux

package gate

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

const (
	initArg   = "__gate-pidns-init"
	insideEnv = "MCP_SANDBOX_GATE_INSIDE"
)

// InOwnPIDNamespace reports whether this process runs inside the namespace Main made.
func InOwnPIDNamespace() bool { return os.Getenv(insideEnv) == "1" }

// Main returns when the caller should run its tests in this process; otherwise it runs them
// in a fresh pid and mount namespace and exits with their status. As root, the test binary
// is re-executed under a tiny init (pid 1, which reaps every orphan) as pid 2, with its own
// /proc; elsewhere it returns at once and tests that need the namespace skip.
func Main() {
	if len(os.Args) > 1 && os.Args[1] == initArg {
		os.Exit(pidnsInit(os.Args[2:]))
	}
	if InOwnPIDNamespace() || os.Geteuid() != 0 {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	// The tests' own descriptors 0-2 pass straight through to the namespace's init.
	pid, err := syscall.ForkExec(exe, append([]string{exe, initArg}, os.Args[1:]...), &syscall.ProcAttr{
		Env: os.Environ(), Files: []uintptr{0, 1, 2},
		Sys: &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "gate: cannot make a pid namespace (%v); running tests in place\n", err)
		return
	}
	var ws syscall.WaitStatus
	for {
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
			break
		}
	}
	if ws.Signaled() {
		os.Exit(2)
	}
	os.Exit(ws.ExitStatus())
}

// pidnsInit is pid 1: it mounts a /proc of its own, starts the tests as pid 2, reaps
// everything, and exits with the tests' status.
func pidnsInit(args []string) int {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		fmt.Fprintf(os.Stderr, "gate: making mounts private: %v\n", err)
		return 2
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		fmt.Fprintf(os.Stderr, "gate: mounting /proc: %v\n", err)
		return 2
	}
	exe, _ := os.Executable()
	env := append(os.Environ(), insideEnv+"=1")
	pid, err := syscall.ForkExec(exe, append([]string{exe}, args...), &syscall.ProcAttr{
		Env: env, Files: []uintptr{0, 1, 2}, Sys: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "gate: starting tests: %v\n", err)
		return 2
	}
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 2
		}
		if got == pid {
			if ws.Signaled() {
				fmt.Fprintf(os.Stderr, "gate: tests killed by %v\n", ws.Signal())
				return 2
			}
			return ws.ExitStatus()
		}
	}
}

func becomeSubreaper() error { return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }

// Ours returns whether a pid belongs to this test binary's processes: inside its own pid
// namespace every process does; elsewhere (a throwaway user: Hostile) only this process's
// descendants, which is where Hostile had orphans handed, and not another test binary's
// or another user's sandboxes on a shared machine.
func Ours() func(pid int) bool {
	if InOwnPIDNamespace() {
		return func(int) bool { return true }
	}
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold anything, so read after its last ')'.
		line := string(b)
		if i := strings.LastIndexByte(line, ')'); i >= 0 {
			if f := strings.Fields(line[i+1:]); len(f) >= 2 {
				parent[pid], _ = strconv.Atoi(f[1])
			}
		}
	}
	self := os.Getpid()
	return func(pid int) bool {
		for i := 0; i < 4096 && pid > 1; i++ {
			if pid = parent[pid]; pid == self {
				return true
			}
		}
		return false
	}
}
