// Package jobobject is the Windows mechanism the specification names for the process level:
// a Job Object holding the interpreter and every process it starts, with kill-on-close (the
// tree dies with the job's last handle, the host's), a job-wide memory limit, a CPU-time
// limit for the whole job, and an active-process limit. The child is started suspended,
// assigned to its job, then resumed, so not one instruction of it runs outside the job.
// Which limit ended a job is read from the job's completion port (JOB_OBJECT_MSG_*), never
// guessed from an exit code.
//
// What is built: the limits for an execution's terms and the reading of the job's messages
// (limits.go, pure functions tested on any platform), and on windows the Job itself
// (job_windows.go: create with limits, start suspended under a restricted token, assign,
// resume, kill, account) with Probe, which runs hostile children (a busy loop, a tree of
// children, an allocation, more processes than allowed) in jobs of their own and reports
// which limit the platform enforced: a limit it did not enforce must be graded unavailable,
// never enforced. Its tests run under Wine (wine64) in CI with Go-built children. What is
// not built yet: the engine.Backend around it, because the bootstrap needs a Windows CPython
// to run and none could be installed here (docs/design.md §4.1, "Windows").
//
// It imports engine and x/sys (windows only). A Job is safe for concurrent use.
package jobobject
