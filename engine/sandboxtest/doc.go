// Package sandboxtest is the backend contract suite: one set of tests, hostile programs
// included, that every backend must pass unchanged. A backend's test calls Run with a
// constructor; each subtest asserts the result's kind and limit, a bounded return time, and
// that no process of the execution survives it.
//
// Hostile subtests run only inside the pid namespace gate.Main makes (a fork bomb or
// kill(-1) that escaped a half-built sandbox must not reach the machine); elsewhere they skip
// with that reason, and fail where MCP_SANDBOX_REQUIRE names "pidns".
//
// It imports engine, failure, internal/gate and the standard library.
package sandboxtest
