package jobobject

import (
	"math"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
)

// The job's limit flags and completion messages, as winnt.h numbers them (the windows tests
// check them against x/sys/windows, which only windows builds can import).
const (
	limitJobTime                 = 0x00000004
	limitActiveProcess           = 0x00000008
	limitJobMemory               = 0x00000200
	limitDieOnUnhandledException = 0x00000400
	limitKillOnJobClose          = 0x00002000

	msgEndOfJobTime       = 1
	msgEndOfProcessTime   = 2
	msgActiveProcessLimit = 3
	msgActiveProcessZero  = 4
	msgNewProcess         = 6
	msgExitProcess        = 7
	msgAbnormalExit       = 8
	msgProcessMemoryLimit = 9
	msgJobMemoryLimit     = 10
)

// Limits are one job's limits.
type Limits struct {
	// Flags are JOBOBJECT_BASIC_LIMIT_INFORMATION.LimitFlags.
	Flags uint32
	// JobTime is the CPU time (user mode, every process of the job together) in 100 ns units.
	JobTime int64
	// JobMemory is the committed memory of every process of the job together, in bytes.
	JobMemory uint64
	// ActiveProcesses is how many processes of the job may exist at once.
	ActiveProcesses uint32
}

// LimitsFor are the limits of an execution under l: kill-on-close always (the tree dies with
// the host's handle), no error dialog that would hold a crashed process, and each of CPU,
// memory and process count that l sets. The CPU limit is the job's user time, which the
// kernel counts for the whole tree; a fork bomb of busy children shares it.
func LimitsFor(l engine.Limits) Limits {
	out := Limits{Flags: limitKillOnJobClose | limitDieOnUnhandledException}
	if l.CPUSeconds > 0 {
		out.Flags |= limitJobTime
		out.JobTime = int64(math.Ceil(l.CPUSeconds * 1e7))
	}
	if l.MemoryBytes > 0 {
		out.Flags |= limitJobMemory
		out.JobMemory = uint64(l.MemoryBytes)
	}
	if l.ProcessCount > 0 {
		out.Flags |= limitActiveProcess
		out.ActiveProcesses = uint32(min(l.ProcessCount, math.MaxUint32))
	}
	return out
}

// LimitHit names the limit the job's messages say ended it, "" when none did. A job whose
// CPU time ran out says so (the system ended every process); the memory limit and the
// active-process limit refuse an allocation or a process start, which the program sees as
// a failure of its own, and the job reports that it happened: the first such message counts.
func LimitHit(msgs []uint32) engine.LimitName {
	for _, m := range msgs {
		switch m {
		case msgEndOfJobTime, msgEndOfProcessTime:
			return engine.LimitCPU
		case msgJobMemoryLimit, msgProcessMemoryLimit:
			return engine.LimitMemory
		case msgActiveProcessLimit:
			return engine.LimitProcessCount
		}
	}
	return ""
}

// Enforcement is what Probe saw the platform do to a hostile child for each limit.
type Enforcement struct {
	// KillOnClose: closing the job's last handle ended its whole tree, grandchildren included.
	KillOnClose bool
	// CPU: a busy loop was ended at the job's CPU time.
	CPU bool
	// CPUMeter: where the job did not end the busy loop, the host's own meter of the job's
	// CPU time (Meter: the time of every living thread of the job's processes) did. It misses
	// what threads that already ended had used, so a program of short-lived processes can pass
	// its limit: the grade is unverified, never enforced.
	CPUMeter bool
	// Memory: an allocation past the job's memory was refused.
	Memory bool
	// ProcessCount: a process start past the active-process limit was refused.
	ProcessCount bool
	// Notes say, for each that did not hold, what happened instead.
	Notes []string
}

// Grades are the guarantees a job gives for what Probe observed: each limit enforced only
// where the platform was seen enforcing it, unavailable otherwise; identity and filesystem
// unavailable always (a job is neither, and the specification grades them so for Windows).
// Guarantees not in the map (network, environment, wall clock) are graded by the engine.
func (e Enforcement) Grades() engine.Guarantees {
	grade := func(held bool) engine.Grade {
		if held {
			return engine.Enforced
		}
		return engine.Unavailable
	}
	cpu := grade(e.CPU)
	if !e.CPU && e.CPUMeter {
		cpu = engine.Unverified
	}
	return engine.Guarantees{
		engine.DimProcessTree:  grade(e.KillOnClose),
		engine.DimCPU:          cpu,
		engine.DimMemory:       grade(e.Memory),
		engine.DimProcessCount: grade(e.ProcessCount),
		engine.DimIdentity:     engine.Unavailable,
		engine.DimFilesystem:   engine.Unavailable,
	}
}

// Lacking are the dimensions the process level runs without here (engine.Facts.Lacking):
// identity and file size always (Windows has no lesser identity for the child, and a job no
// file size limit), CPU and memory where the job was not seen enforcing them.
func (e Enforcement) Lacking() []engine.Dimension {
	out := []engine.Dimension{engine.DimIdentity, engine.DimFileSize}
	if !e.CPU {
		out = append(out, engine.DimCPU)
	}
	if !e.Memory {
		out = append(out, engine.DimMemory)
	}
	return out
}
