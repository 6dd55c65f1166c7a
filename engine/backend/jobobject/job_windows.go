//go:build windows

package jobobject

import (
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"golang.org/x/sys/windows"
)

// stopKey is the completion key Close posts to end the reader; the job's own messages carry
// the job's handle.
const stopKey = ^uintptr(0)

// associateCompletionPort is JOBOBJECT_ASSOCIATE_COMPLETION_PORT, which x/sys does not define.
type associateCompletionPort struct {
	CompletionKey  uintptr
	CompletionPort windows.Handle
}

// basicAccounting is JOBOBJECT_BASIC_ACCOUNTING_INFORMATION.
type basicAccounting struct {
	TotalUserTime             int64
	TotalKernelTime           int64
	ThisPeriodTotalUserTime   int64
	ThisPeriodTotalKernelTime int64
	TotalPageFaultCount       uint32
	TotalProcesses            uint32
	ActiveProcesses           uint32
	TotalTerminatedProcesses  uint32
}

// Job is one execution's Job Object and its completion port, whose messages a goroutine of
// its own collects. Close kills what is left (kill-on-close) and is idempotent.
type Job struct {
	h, port windows.Handle
	reader  sync.WaitGroup

	mu     sync.Mutex // guards msgs, empty, closed and overCPU
	msgs   []uint32
	empty  chan struct{} // closed at JOB_OBJECT_MSG_ACTIVE_PROCESS_ZERO
	closed bool
	// overCPU: the host's meter ended the job for its CPU time (meter).
	overCPU bool
}

// New creates a job with l and a completion port for its messages.
func New(l Limits) (*Job, error) {
	h, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return nil, fmt.Errorf("CreateJobObject: %w", err)
	}
	j := &Job{h: h, empty: make(chan struct{})}
	var info windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	info.BasicLimitInformation.LimitFlags = l.Flags
	info.BasicLimitInformation.PerJobUserTimeLimit = l.JobTime
	info.BasicLimitInformation.ActiveProcessLimit = l.ActiveProcesses
	info.JobMemoryLimit = uintptr(l.JobMemory)
	if _, err := windows.SetInformationJobObject(h, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		windows.CloseHandle(h)
		return nil, fmt.Errorf("setting the job's limits: %w", err)
	}
	if j.port, err = windows.CreateIoCompletionPort(windows.InvalidHandle, 0, 0, 1); err != nil {
		windows.CloseHandle(h)
		return nil, fmt.Errorf("CreateIoCompletionPort: %w", err)
	}
	assoc := associateCompletionPort{CompletionKey: uintptr(h), CompletionPort: j.port}
	if _, err := windows.SetInformationJobObject(h, windows.JobObjectAssociateCompletionPortInformation,
		uintptr(unsafe.Pointer(&assoc)), uint32(unsafe.Sizeof(assoc))); err != nil {
		windows.CloseHandle(j.port)
		windows.CloseHandle(h)
		return nil, fmt.Errorf("associating the job's completion port: %w", err)
	}
	j.reader.Add(1)
	go j.read()
	return j, nil
}

// read collects the job's messages until the port is closed.
func (j *Job) read() {
	defer j.reader.Done()
	for {
		var msg uint32
		var key uintptr
		var ov *windows.Overlapped
		if err := windows.GetQueuedCompletionStatus(j.port, &msg, &key, &ov, windows.INFINITE); err != nil || key == stopKey {
			return // Close posted the stop, or the port was closed
		}
		j.mu.Lock()
		j.msgs = append(j.msgs, msg)
		if msg == msgActiveProcessZero {
			select {
			case <-j.empty:
			default:
				close(j.empty)
			}
		}
		j.mu.Unlock()
	}
}

// StartOptions say how Start starts a process.
type StartOptions struct {
	// RestrictedToken starts the process under a restricted copy of this process's token:
	// every privilege but SeChangeNotify removed (DISABLE_MAX_PRIVILEGE).
	RestrictedToken bool
}

// Start starts cmd suspended, assigns it to the job and then resumes it: nothing of it runs
// outside the job. A process the job refuses is terminated before it ran.
func (j *Job) Start(cmd *exec.Cmd, opts *StartOptions) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.CreationFlags |= windows.CREATE_SUSPENDED | windows.CREATE_NEW_PROCESS_GROUP
	if opts != nil && opts.RestrictedToken {
		tok, err := restrictedToken()
		if err != nil {
			return err
		}
		defer tok.Close()
		cmd.SysProcAttr.Token = syscall.Token(tok)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	pid := uint32(cmd.Process.Pid)
	ph, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE|windows.PROCESS_QUERY_LIMITED_INFORMATION, false, pid)
	if err == nil {
		err = windows.AssignProcessToJobObject(j.h, ph)
		if err != nil {
			err = fmt.Errorf("AssignProcessToJobObject: %w", err)
		}
		windows.CloseHandle(ph)
	} else {
		err = fmt.Errorf("OpenProcess: %w", err)
	}
	if err == nil {
		err = resume(pid)
	}
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return err
	}
	return nil
}

// resume resumes every thread of the suspended process pid (its one thread, at creation).
func resume(pid uint32) error {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPTHREAD, 0)
	if err != nil {
		return fmt.Errorf("CreateToolhelp32Snapshot: %w", err)
	}
	defer windows.CloseHandle(snap)
	te := windows.ThreadEntry32{Size: uint32(unsafe.Sizeof(windows.ThreadEntry32{}))}
	resumed := 0
	for err = windows.Thread32First(snap, &te); err == nil; err = windows.Thread32Next(snap, &te) {
		if te.OwnerProcessID != pid {
			continue
		}
		th, err := windows.OpenThread(windows.THREAD_SUSPEND_RESUME, false, te.ThreadID)
		if err != nil {
			return fmt.Errorf("OpenThread: %w", err)
		}
		_, err = windows.ResumeThread(th)
		windows.CloseHandle(th)
		if err != nil {
			return fmt.Errorf("ResumeThread: %w", err)
		}
		resumed++
	}
	if resumed == 0 {
		return errors.New("the suspended process has no thread to resume")
	}
	return nil
}

var (
	advapi32                  = windows.NewLazySystemDLL("advapi32.dll")
	procCreateRestrictedToken = advapi32.NewProc("CreateRestrictedToken")
)

const disableMaxPrivilege = 0x1

// restrictedToken is a primary token like this process's with every privilege removed.
func restrictedToken() (windows.Token, error) {
	var self windows.Token
	if err := windows.OpenProcessToken(windows.CurrentProcess(), windows.TOKEN_DUPLICATE|windows.TOKEN_ASSIGN_PRIMARY|
		windows.TOKEN_QUERY|windows.TOKEN_ADJUST_DEFAULT|windows.TOKEN_ADJUST_SESSIONID, &self); err != nil {
		return 0, fmt.Errorf("OpenProcessToken: %w", err)
	}
	defer self.Close()
	var restricted windows.Token
	r, _, err := procCreateRestrictedToken.Call(uintptr(self), disableMaxPrivilege, 0, 0, 0, 0, 0, 0, uintptr(unsafe.Pointer(&restricted)))
	if r == 0 {
		return 0, fmt.Errorf("CreateRestrictedToken: %w", err)
	}
	return restricted, nil
}

// Kill ends every process of the job. It is idempotent.
func (j *Job) Kill() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return nil
	}
	return windows.TerminateJobObject(j.h, 1)
}

// Empty is closed once the job's last process has exited (JOB_OBJECT_MSG_ACTIVE_PROCESS_ZERO).
func (j *Job) Empty() <-chan struct{} { return j.empty }

// Messages are the job's completion messages so far.
func (j *Job) Messages() []uint32 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]uint32(nil), j.msgs...)
}

// LimitHit names the limit the job's messages say ended it, "" when none did.
func (j *Job) LimitHit() string { return string(LimitHit(j.Messages())) }

// Accounting is the job's CPU time (user and kernel, every process, living or dead) in
// seconds, and its active and total process counts.
type Accounting struct {
	CPUSeconds      float64
	ActiveProcesses int
	TotalProcesses  int
}

// Account reads the job's accounting.
func (j *Job) Account() (Accounting, error) {
	var a basicAccounting
	if err := windows.QueryInformationJobObject(j.h, windows.JobObjectBasicAccountingInformation,
		uintptr(unsafe.Pointer(&a)), uint32(unsafe.Sizeof(a)), nil); err != nil {
		return Accounting{}, err
	}
	return Accounting{CPUSeconds: float64(a.TotalUserTime+a.TotalKernelTime) / 1e7,
		ActiveProcesses: int(a.ActiveProcesses), TotalProcesses: int(a.TotalProcesses)}, nil
}

// Close closes the job's handle, which kills every process still in it (kill-on-close), then
// its completion port. It is idempotent.
func (j *Job) Close() error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return nil
	}
	j.closed = true
	j.mu.Unlock()
	err := windows.CloseHandle(j.h)
	// Closing the port does not wake a wait on it under Wine: the reader is told to stop.
	_ = windows.PostQueuedCompletionStatus(j.port, 0, stopKey, nil)
	j.reader.Wait()
	windows.CloseHandle(j.port)
	return err
}

// processIDList is JOBOBJECT_BASIC_PROCESS_ID_LIST with room for maxListed processes.
type processIDList struct {
	Assigned, Listed uint32
	IDs              [maxListed]uintptr
}

const maxListed = 1024

var (
	kernel32           = windows.NewLazySystemDLL("kernel32.dll")
	procGetThreadTimes = kernel32.NewProc("GetThreadTimes")
)

// CPUSeconds is the job's CPU time: its own accounting (every process, living or dead), or,
// where that counts nothing (Wine 8 accounts no CPU time to a job), the user and kernel time
// of every living thread of the job's processes, which misses what ended threads had used.
func (j *Job) CPUSeconds() float64 {
	if a, err := j.Account(); err == nil && a.CPUSeconds > 0 {
		return a.CPUSeconds
	}
	var l processIDList
	if err := windows.QueryInformationJobObject(j.h, windows.JobObjectBasicProcessIdList,
		uintptr(unsafe.Pointer(&l)), uint32(unsafe.Sizeof(l)), nil); err != nil || l.Listed == 0 {
		return 0
	}
	in := map[uint32]bool{}
	for _, id := range l.IDs[:min(l.Listed, maxListed)] {
		in[uint32(id)] = true
	}
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPTHREAD, 0)
	if err != nil {
		return 0
	}
	defer windows.CloseHandle(snap)
	te := windows.ThreadEntry32{Size: uint32(unsafe.Sizeof(windows.ThreadEntry32{}))}
	var sum float64
	for err = windows.Thread32First(snap, &te); err == nil; err = windows.Thread32Next(snap, &te) {
		if !in[te.OwnerProcessID] {
			continue
		}
		th, err := windows.OpenThread(windows.THREAD_QUERY_LIMITED_INFORMATION, false, te.ThreadID)
		if err != nil {
			continue
		}
		var created, exited, kernel, user windows.Filetime
		if r, _, _ := procGetThreadTimes.Call(uintptr(th), uintptr(unsafe.Pointer(&created)), uintptr(unsafe.Pointer(&exited)),
			uintptr(unsafe.Pointer(&kernel)), uintptr(unsafe.Pointer(&user))); r != 0 {
			sum += float64(filetime(kernel)+filetime(user)) / 1e7
		}
		windows.CloseHandle(th)
	}
	return sum
}

func filetime(f windows.Filetime) uint64 { return uint64(f.HighDateTime)<<32 | uint64(f.LowDateTime) }

// meterTick is how often the meter reads the job's CPU time: what a program can spend past
// its limit before the meter sees it.
const meterTick = 100 * time.Millisecond

// meter ends the job (TerminateJobObject) once its CPU time passes limit seconds, reading it
// every meterTick until stop is closed; it reports whether it ended the job. It stands in
// for the job's own CPU limit where the platform does not enforce that (Wine), and is set a
// grace above it, so that where the platform does, the job's limit comes first.
func (j *Job) meter(limit float64, stop <-chan struct{}) bool {
	tick := time.NewTicker(meterTick)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return false
		case <-tick.C:
		}
		if j.CPUSeconds() > limit {
			j.mu.Lock()
			j.overCPU = true
			j.mu.Unlock()
			_ = j.Kill()
			return true
		}
	}
}

// OverCPU reports whether the job was ended for its CPU time: by its own limit (the job's
// end-of-time message) or by the host's meter.
func (j *Job) OverCPU() bool {
	j.mu.Lock()
	over := j.overCPU
	j.mu.Unlock()
	return over || LimitHit(j.Messages()) == engine.LimitCPU
}
