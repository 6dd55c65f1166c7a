package gate

import (
	"os"
	"strings"
	"testing"
)

// RequireEnv names the capabilities whose absence fails a test instead of skipping it: a
// comma-separated list, or "all".
const RequireEnv = "MCP_SANDBOX_REQUIRE"

// Required reports whether capability must be present.
func Required(capability string) bool {
	for _, c := range strings.Split(os.Getenv(RequireEnv), ",") {
		c = strings.TrimSpace(c)
		if c == "all" || c == capability {
			return true
		}
	}
	return false
}

// Require skips t with reason when ok is false, or fails it when the capability is required.
func Require(t testing.TB, capability string, ok bool, reason string) {
	t.Helper()
	if ok {
		return
	}
	if Required(capability) {
		t.Fatalf("%s is required here (%s=%s) but unavailable: %s", capability, RequireEnv, os.Getenv(RequireEnv), reason)
	}
	t.Skipf("needs %s: %s", capability, reason)
}

// AppliesOnly skips t with reason when ok is false: the test does not apply to this machine's
// configuration (it runs only without root, only on x86-64, only in long mode), which no
// machine lacks a capability for. Unlike Require it never fails; it is the one other door to a
// skip (meta_test.go allows no t.Skip outside this package).
func AppliesOnly(t testing.TB, ok bool, reason string) {
	t.Helper()
	if !ok {
		t.Skipf("does not apply here: %s", reason)
	}
}
