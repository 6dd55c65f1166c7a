//go:build windows

package jobobject

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"golang.org/x/sys/windows"
)

// ChildMain runs one hostile behaviour, writing what it reports to stdout (the process's own,
// which its caller hands it), and returns the exit status:
//
//	spin            a busy loop, forever
//	sleep           sleeps, forever
//	tree            starts two `sleep` children, prints their pids on a line, sleeps
//	alloc BYTES     commits BYTES of memory; prints "committed" or "refused"
//	spawn N         starts N `sleep` children; prints how many started
//	print42         prints 42
func ChildMain(args []string, stdout io.Writer) int {
	if len(args) == 0 {
		return 2
	}
	self, _ := os.Executable()
	sleepChild := func() (*exec.Cmd, error) {
		c := exec.Command(self, ChildArg, "sleep")
		return c, c.Start()
	}
	switch args[0] {
	case "spin":
		for n := 0; ; n++ {
			_ = n * n
		}
	case "sleep":
		time.Sleep(time.Hour)
	case "tree":
		var pids []string
		for range 2 {
			c, err := sleepChild()
			if err != nil {
				fmt.Fprintln(stdout, "error", err)
				return 1
			}
			pids = append(pids, strconv.Itoa(c.Process.Pid))
		}
		fmt.Fprintln(stdout, strings.Join(pids, " "))
		time.Sleep(time.Hour)
	case "alloc":
		n, _ := strconv.ParseUint(args[1], 10, 64)
		// VirtualAlloc, not Go's heap: a refused commit is an error here, where the runtime
		// would end the process.
		if _, err := windows.VirtualAlloc(0, uintptr(n), windows.MEM_COMMIT|windows.MEM_RESERVE, windows.PAGE_READWRITE); err != nil {
			fmt.Fprintln(stdout, "refused")
			return 0
		}
		fmt.Fprintln(stdout, "committed")
	case "spawn":
		n, _ := strconv.Atoi(args[1])
		started := 0
		for range n {
			if _, err := sleepChild(); err == nil {
				started++
			}
		}
		fmt.Fprintln(stdout, started)
	case "print42":
		fmt.Fprintln(stdout, 42)
	default:
		return 2
	}
	return 0
}

// The limits of Probe's cases.
var (
	limitsNone      = engine.Limits{}
	limitsCPU       = engine.Limits{CPUSeconds: 1}
	limitsMemory    = engine.Limits{MemoryBytes: 64 << 20}
	limitsProcesses = engine.Limits{ProcessCount: 2}
)

// run starts self's hostile child mode in a job with l and returns the job, the command and
// a reader of its stdout. A start that fails is tried once more, in a new job: a failed start
// says nothing of what a job enforces, and one failure (Wine's CreateProcess has answered
// "Internal error" now and then on a loaded machine) must not grade the backend unavailable
// for the server's life.
func run(self string, l Limits, args ...string) (*Job, *exec.Cmd, *bufio.Reader, error) {
	j, cmd, out, err := start(self, l, args...)
	if err != nil {
		j, cmd, out, err = start(self, l, args...)
	}
	return j, cmd, out, err
}

// start is one try of run.
func start(self string, l Limits, args ...string) (*Job, *exec.Cmd, *bufio.Reader, error) {
	j, err := New(l)
	if err != nil {
		return nil, nil, nil, err
	}
	cmd := exec.Command(self, append([]string{ChildArg}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		j.Close()
		return nil, nil, nil, err
	}
	if err := j.Start(cmd, nil); err != nil {
		j.Close()
		return nil, nil, nil, err
	}
	return j, cmd, bufio.NewReader(out), nil
}

// Probe runs each hostile child in a job of its own and reports what the platform enforced.
// self is a binary whose main hands ChildArg to ChildMain; each case is bounded by ctx and
// by bound. Nothing it starts outlives it: every job is closed (kill-on-close) and, should
// that not end a process, the process is killed by its handle.
func Probe(ctx context.Context, self string, bound time.Duration) (e Enforcement) {
	note := func(format string, args ...any) { e.Notes = append(e.Notes, fmt.Sprintf(format, args...)) }
	wait := func(ch <-chan struct{}) bool {
		t := time.NewTimer(bound)
		defer t.Stop()
		select {
		case <-ch:
			return true
		case <-t.C:
		case <-ctx.Done():
		}
		return false
	}
	exited := func(cmd *exec.Cmd) <-chan struct{} {
		ch := make(chan struct{})
		go func() { _ = cmd.Wait(); close(ch) }()
		return ch
	}

	// CPU: a busy loop in a job of one second of CPU time, with the host's meter a grace
	// above it in case the job's own limit does not hold.
	if j, cmd, _, err := run(self, LimitsFor(limitsCPU), "spin"); err != nil {
		note("cpu: %v", err)
	} else {
		done := exited(cmd)
		metered := make(chan bool, 1)
		go func() { metered <- j.meter(limitsCPU.CPUSeconds+engine.CPUGraceSeconds, done) }()
		ended := wait(done)
		if !ended {
			_ = cmd.Process.Kill()
			<-done
		}
		byMeter := <-metered
		switch {
		case !ended:
			note("cpu: a busy loop went on in a job limited to %gs of CPU time (%.1fs counted)", limitsCPU.CPUSeconds, j.CPUSeconds())
		case LimitHit(j.Messages()) == engine.LimitCPU:
			e.CPU = true
		case byMeter:
			e.CPUMeter = true
			note("cpu: the job's CPU time limit did not end a busy loop; the host's meter of its threads' time did")
		default:
			note("cpu: the busy loop ended without the job's end-of-time message (%v)", j.Messages())
		}
		j.Close()
	}

	// Kill-on-close: a child with two children; closing the job must end all three.
	if j, cmd, out, err := run(self, LimitsFor(limitsNone), "tree"); err != nil {
		note("process_tree: %v", err)
	} else {
		done := exited(cmd)
		line, _ := out.ReadString('\n')
		var handles []windows.Handle
		for _, f := range strings.Fields(line) {
			if pid, err := strconv.Atoi(f); err == nil {
				if h, err := windows.OpenProcess(windows.SYNCHRONIZE|windows.PROCESS_TERMINATE, false, uint32(pid)); err == nil {
					handles = append(handles, h)
				}
			}
		}
		j.Close()
		all := wait(done)
		for _, h := range handles {
			if ev, _ := windows.WaitForSingleObject(h, uint32(bound/time.Millisecond)); ev != windows.WAIT_OBJECT_0 {
				all = false
				_ = windows.TerminateProcess(h, 1)
			}
			windows.CloseHandle(h)
		}
		switch {
		case len(handles) != 2:
			note("process_tree: the child did not report its two children (%q)", line)
		case !all:
			note("process_tree: closing the job left processes of its tree running")
		default:
			e.KillOnClose = true
		}
		_ = cmd.Process.Kill()
		<-done
	}

	// Memory: a commit four times the job's memory limit.
	if j, cmd, out, err := run(self, LimitsFor(limitsMemory), "alloc", strconv.FormatInt(4*limitsMemory.MemoryBytes, 10)); err != nil {
		note("memory: %v", err)
	} else {
		done := exited(cmd)
		line, _ := out.ReadString('\n')
		if strings.TrimSpace(line) == "refused" {
			e.Memory = true
		} else {
			note("memory: a commit of %d bytes in a job limited to %d: %q", 4*limitsMemory.MemoryBytes, limitsMemory.MemoryBytes, strings.TrimSpace(line))
		}
		_ = cmd.Process.Kill()
		j.Close()
		<-done
	}

	// Process count: four children asked for in a job of two processes (the asker is one).
	if j, cmd, out, err := run(self, LimitsFor(limitsProcesses), "spawn", "4"); err != nil {
		note("process_count: %v", err)
	} else {
		done := exited(cmd)
		line, _ := out.ReadString('\n')
		if n, err := strconv.Atoi(strings.TrimSpace(line)); err == nil && n <= limitsProcesses.ProcessCount-1 {
			e.ProcessCount = true
		} else {
			note("process_count: %q of 4 children started in a job of %d processes", strings.TrimSpace(line), limitsProcesses.ProcessCount)
		}
		_ = cmd.Process.Kill()
		j.Close()
		<-done
	}
	return e
}
