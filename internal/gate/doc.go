// Package gate holds the test gates: Require, which skips a test that needs a capability this
// machine lacks with the exact reason, or fails it when MCP_SANDBOX_REQUIRE names that
// capability (CI sets it, so a skip there is a failure and never passes for support); and
// Main, which runs a test binary as pid 2 of its own pid namespace when it can, so that a
// hostile program that escaped a half-built sandbox cannot reach the rest of the machine;
// and Hostile, which admits a test of such programs only there, or when the tests run as a
// throwaway non-root uid made for them (ThrowawayUIDEnv), whose own processes are all an
// escape could reach. Scaled stretches a test's deadline by the machine's load per CPU, or
// by MCP_SANDBOX_TEST_SCALE where CI sets more, so that tests hold on a busy machine.
//
// It imports the standard library and x/sys. It is for tests and the init paths of test
// binaries only.
package gate
