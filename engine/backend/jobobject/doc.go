// Package jobobject is the Windows backend the specification names for the process level:
// a Job Object holding the interpreter and every process it starts, with kill-on-close (the
// tree dies with the job's last handle, the host's), a job-wide memory limit, a CPU-time
// limit for the whole job, and an active-process limit. The child is started suspended,
// assigned to its job, then resumed, so not one instruction of it runs outside the job.
// Which limit ended a job is read from the job's completion port (JOB_OBJECT_MSG_*), never
// guessed from an exit code.
//
// The limits for an execution's terms and the reading of the job's messages (limits.go) are
// pure functions tested on any platform, and so is the channel (channel.go): internal/tokenconn
// on a listener on 127.0.0.1, which takes the first connection presenting the execution's
// token, which the child read from its stdin, and no other. On windows, job_windows.go is the Job (create with
// limits, start suspended under a restricted token, assign, resume, kill, account, and a
// meter of the host's that ends the job at its CPU time where the job's own limit does not
// hold), probe_windows.go is Probe, which runs hostile children (a busy loop, a tree of
// children, an allocation, more processes than allowed) in jobs of their own and reports
// which limit the platform enforced, and backend_windows.go is the engine.Backend: the
// interpreter runs a stub that reads the bootstrap from stdin (it is longer than a Windows
// command line may be), then the token, and connects back (the bootstrap's loopback mode).
// Every child carries Probe's grades (engine.Facts.Graded): a limit the platform was not seen
// enforcing is never graded enforced, and what it lacks (Facts.Lacking) the process level
// runs without. Its tests run under Wine (wine64) in CI: the windows tests with Go-built
// children (TestUnderWine), and mcp-sandbox.exe with a Windows CPython (TestRunUnderWine).
//
// It imports engine, failure, internal/tokenconn, internal/spawn and x/sys (windows only). A Job, a Backend and
// a channel are safe for concurrent use.
package jobobject
