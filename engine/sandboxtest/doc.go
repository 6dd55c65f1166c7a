// Package sandboxtest is the backend contract suite: one set of tests, hostile programs
// included, that every backend must pass unchanged. A backend's test calls Run with a
// constructor; each subtest asserts the result's kind and limit, a bounded return time, and
// that no process of the execution survives it.
//
// Hostile (hostile.go) lists every hostile case the project tests, with its class (take-down,
// channel between executions or tenants, exhaustion, escape, protocol abuse): those Run runs
// against every backend, and those tested beside the code they attack, each naming its test.
// RunKernelSurface runs the kernel attack surface cases alone, under terms a backend's whole
// contract does not reach (the container backend's, with network).
//
// Hostile subtests run only where gate.Hostile allows them: inside the pid namespace
// gate.Main makes, or as a throwaway non-root user (a fork bomb or kill(-1) that escaped a
// half-built sandbox must not reach the machine); elsewhere they skip with that reason, and
// fail where MCP_SANDBOX_REQUIRE names "hostile".
//
// Main is every backend test binary's TestMain: the init helper's hook, then the pid namespace.
//
// It imports engine, outputs (an outcome's attachments), failure, internal/gate, internal/launch
// and the standard library.
package sandboxtest
