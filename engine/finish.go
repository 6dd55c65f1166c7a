package engine

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mcp-sandbox/mcp-sandbox/egress"
	"github.com/mcp-sandbox/mcp-sandbox/engine/wire"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
)

// finish turns how the execution ended into the Outcome: value or failure, limit_hit, and the
// output streams.
func (s *session) finish(done *wire.Done, exit *Exit, ending *Failure, limit *LimitName, tree TreeUsage) {
	res := s.res
	if s.proxy != nil {
		// The program is over: what its proxy decided is final once no connection is left.
		s.proxy.Close()
		st := s.proxy.Stats()
		res.Network = &st
	} else if s.t.Network == NetworkRules {
		res.Network = &egress.Stats{Refused: []egress.Refusal{}}
	}
	res.Stdout, res.StdoutSize, res.StdoutData = s.p.stdout.Preview(), s.p.stdout.Size(), s.p.stdout.Bytes()
	res.Stderr, res.StderrSize, res.StderrData = s.p.stderr.Preview(), s.p.stderr.Size(), s.p.stderr.Bytes()
	res.Attachments = []outputs.Attachment{
		streamAttachment("stdout", s.p.stdout.Size(), int64(len(res.StdoutData)), s.p.stdout.Truncated(), s.r.opts.PreviewBytes),
		streamAttachment("stderr", s.p.stderr.Size(), int64(len(res.StderrData)), s.p.stderr.Truncated(), s.r.opts.PreviewBytes),
	}

	switch {
	case ending != nil:
		res.Failure = ending
	case done != nil && done.OK:
		res.Value = done.Value
		if len(res.Value) == 0 || done.ValueRepr != nil {
			res.Value = json.RawMessage("null")
		}
		res.ValueRepr = done.ValueRepr
		res.ValueType = done.ValueType
	case done != nil:
		res.Failure = s.programFailure(done.Error, tree, &limit)
	default:
		res.Failure = s.exitFailure(exit, tree, &limit)
	}
	res.LimitHit = limit
	if tree.Escaped {
		escaped(res, tree.EscapedWhy)
	}
	if res.Failure != nil && !res.Failure.Executed && res.Failure.Kind.Refusal() {
		res.Isolation = ""
		if len(res.Guarantees) > 0 {
			res.Isolation = LevelProcess
		}
	}
	if res.Isolation == "" {
		res.Isolation = LevelProcess
	}
}

// escaped marks a result whose tree was not seen to die: never a clean result with a
// possible survivor. The process_tree grade becomes unavailable, and the failure is a
// protocol_violation (only the program could have kept the backend's own init from killing
// its tree, or the kernel refused the host's SIGKILL: why says so), unless a limit, the wall
// clock or a cancel had ended it already.
func escaped(res *Outcome, why string) {
	if why == "" {
		why = "the sandbox's init did not report the program's process tree dead (the program killed or stopped it)"
	}
	why += ", so processes the program started may have outlived the execution"
	if res.Guarantees != nil {
		res.Guarantees[DimProcessTree] = Unavailable
	}
	switch {
	case res.Failure == nil:
		res.Failure = &Failure{Kind: failure.ProtocolViolation, Executed: true, Message: why}
		res.Value = json.RawMessage("null")
	case res.Failure.Kind == failure.ProgramError:
		res.Failure.Kind = failure.ProtocolViolation
		fallthrough
	default:
		res.Failure.Message += "; " + why
	}
}

func streamAttachment(name string, size, kept int64, truncated bool, preview int64) outputs.Attachment {
	loc := "inline"
	if truncated || size > preview {
		loc = "preview_only"
	}
	return outputs.Attachment{Name: name, ContentType: "text/plain", Size: size, Truncated: truncated || size > preview, Location: loc}
}

// programFailure classifies an uncaught exception: a limit that surfaced as an ordinary
// Python error is still that limit.
func (s *session) programFailure(pe *wire.ProgramError, tree TreeUsage, limit **LimitName) *Failure {
	if pe == nil {
		return &Failure{Kind: failure.ProtocolViolation, Executed: true, Message: "the child reported a failure without an error"}
	}
	if pe.NotSerializable {
		return &Failure{Kind: failure.ValueNotSerializable, Executed: true,
			Message: "the program's value could not be returned: " + pe.Message + "; return JSON data (dict, list, str, int, float, bool, None)"}
	}
	f := &Failure{Kind: failure.ProgramError, Executed: true, Traceback: pe.Traceback,
		Message: strings.TrimSpace(pe.Type + ": " + pe.Message)}
	if pe.Type == "ModuleNotFoundError" {
		f.Message += moduleHint
	}
	if l := limitFromError(pe, tree); l != "" {
		f.Kind = failure.LimitExceeded
		f.Message = fmt.Sprintf("%s (the program hit its %s limit of %s)", f.Message, l, s.describeLimit(l))
		*limit = limitPtr(l)
	}
	return f
}

// moduleHint follows a ModuleNotFoundError: nothing can be installed from inside, so the way
// out is the operator's, and a model can pass it on.
const moduleHint = ` (a program imports only what its profile's interpreter has: install the package for the profile's "python:" interpreter, see the README section "Python packages")`

func limitFromError(pe *wire.ProgramError, tree TreeUsage) LimitName {
	switch {
	case pe.Type == "MemoryError":
		return LimitMemory
	case pe.Errno == errnoEFBIG:
		return LimitFileSize
	case tree.PIDsLimitHit && (pe.Errno == errnoEAGAIN || strings.Contains(pe.Message, "can't start new thread")):
		return LimitProcessCount
	case pe.Errno == errnoEAGAIN && strings.Contains(pe.Traceback, "fork"):
		return LimitProcessCount
	case strings.Contains(pe.Message, "can't start new thread"):
		return LimitProcessCount
	case pe.Errno == errnoENOSPC:
		return "" // a full workspace is the program's own OSError, not a limit of ours
	}
	return ""
}

// exitFailure explains a child that ended without a done frame.
func (s *session) exitFailure(exit *Exit, tree TreeUsage, limit **LimitName) *Failure {
	if exit == nil {
		exit = &Exit{Code: -1}
	}
	switch {
	case cpuLimitKill(exit, s.p.child.Facts(), tree, CPURlimit(s.t.CPUSeconds)):
		*limit = limitPtr(LimitCPU)
		return &Failure{Kind: failure.LimitExceeded, Executed: true,
			Message: fmt.Sprintf("the program used its %s of CPU time and was killed", s.describeLimit(LimitCPU))}
	case exit.Signal == signalFileSize:
		*limit = limitPtr(LimitFileSize)
		return &Failure{Kind: failure.LimitExceeded, Executed: true,
			Message: fmt.Sprintf("the program wrote past its file size limit of %s and was killed", s.describeLimit(LimitFileSize))}
	case tree.OOMKilled:
		*limit = limitPtr(LimitMemory)
		return &Failure{Kind: failure.LimitExceeded, Executed: true,
			Message: fmt.Sprintf("the program's processes used more than %s of memory and were killed", s.describeLimit(LimitMemory))}
	case exit.Err != nil:
		return &Failure{Kind: failure.Internal, Executed: true, Message: "the host lost track of the sandbox child"}
	case exit.Code == 125 && !s.helloSeen:
		return &Failure{Kind: failure.BackendUnavailable, Message: "the sandbox could not be set up: " + lastLine(s.p.stderr.Preview()) + "; nothing ran"}
	case exit.Signal != "":
		return &Failure{Kind: failure.ProgramError, Executed: true,
			Message: fmt.Sprintf("the interpreter was killed by a signal (%s) after %.2fs of CPU, before the program finished", exit.Signal, exit.CPUSeconds)}
	}
	return &Failure{Kind: failure.ProgramError, Executed: true,
		Message: fmt.Sprintf("the interpreter exited with status %d before the program finished (os._exit, or a crash; see stderr)", exit.Code)}
}

// cpuLimitKill says whether the interpreter died of its CPU limit: RLIMIT_CPU's soft limit is
// limit seconds, where the kernel sends SIGXCPU (the bootstrap flushes the program's output
// and ends the interpreter with that signal), and its hard limit CPUGraceSeconds later, where
// it sends SIGKILL to a program that ignored SIGXCPU.
//
// A SIGKILL is the limit's when the interpreter's clock that RLIMIT_CPU is checked against
// had reached the (soft) limit: the kernel sends SIGKILL in the very tick that clock reaches
// the hard one, and
// the clock only moves at ticks, so a program killing itself (or killed by its own children,
// or by the OOM killer) has always used less. That clock is the tick-sampled utime+stime
// (CPUCLOCK_PROF), not what rusage reports (the scheduler's precise runtime): under load the
// sampled time runs well ahead, and a program the kernel killed at a 2 s limit has been
// measured at 1.42 s by rusage on a loaded 2-core machine, so no margin on rusage tells the
// two apart however loaded the machine is. Where the backend read that clock from the dead
// interpreter (Exit.RlimitCPUSeconds), it decides. Where the interpreter is its pid
// namespace's init (bwrap), nothing inside the sandbox can SIGKILL it, so a SIGKILL the host
// did not send and no memory limit explains came from RLIMIT_CPU. Otherwise (a backend that
// can read neither) rusage within 10% (at least 0.25 s) of the limit is the best guess left,
// and it errs towards program_error under load.
func cpuLimitKill(exit *Exit, facts Facts, tree TreeUsage, limit uint64) bool {
	switch {
	case exit.Signal == signalCPU:
		return true
	case exit.Signal != signalKill:
		return false
	case exit.RlimitCPUSeconds > 0:
		return exit.RlimitCPUSeconds >= float64(limit)
	case facts.InterpreterIsInit:
		return !tree.OOMKilled
	}
	return exit.CPUSeconds >= float64(limit)-max(0.25, float64(limit)*0.1)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimPrefix(s, "mcp-sandbox-init: ")
}

func (s *session) describeLimit(l LimitName) string {
	switch l {
	case LimitCPU:
		return fmt.Sprintf("%gs", s.t.CPUSeconds)
	case LimitWall:
		return fmt.Sprintf("%gs", s.t.WallSeconds)
	case LimitMemory:
		return byteSize(s.t.MemoryBytes)
	case LimitFileSize:
		return byteSize(s.t.FileSizeBytes)
	case LimitProcessCount:
		return fmt.Sprintf("%d processes", s.t.ProcessCount)
	}
	return string(l)
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// The errno values a child reports are Linux's, whatever the host runs (a remote child is
// Linux too), so they are spelled out rather than taken from this platform's syscall package.
const (
	errnoEAGAIN = 11
	errnoEFBIG  = 27
	errnoENOSPC = 28
)
