package gate

import (
	"os"
	"strconv"
	"strings"
	"sync"
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

// ThrowawayUIDEnv names a uid that exists only to run these tests (CI makes one, with a
// small process limit): running as it, a program that escaped a half-built sandbox can harm
// nothing but that uid's own processes, as inside the tests' own pid namespace.
const ThrowawayUIDEnv = "MCP_SANDBOX_THROWAWAY_UID"

// Hostile lets a test run programs that attack their sandbox only where an escape is
// contained: inside the test binary's own pid namespace (Main, as root), or as a throwaway
// non-root uid named by ThrowawayUIDEnv. Elsewhere the test skips, or fails where
// MCP_SANDBOX_REQUIRE names "hostile".
func Hostile(t testing.TB) {
	t.Helper()
	uid := os.Geteuid()
	throwaway := uid != 0 && os.Getenv(ThrowawayUIDEnv) == strconv.Itoa(uid)
	Require(t, "hostile", InOwnPIDNamespace() || throwaway,
		"hostile programs run only inside the test binary's own pid namespace (which needs root), "+
			"or as a throwaway user named by "+ThrowawayUIDEnv)
	if !InOwnPIDNamespace() {
		adoptOrphans.Do(func() {
			if err := becomeSubreaper(); err != nil {
				t.Fatalf("gate: becoming the subreaper of the tests' processes: %v", err)
			}
		})
	}
}

// adoptOrphans makes this test process, once, the child subreaper of everything it starts:
// outside a pid namespace of its own, an orphan that escaped a sandbox is handed here rather
// than to the machine's init, so Ours still finds it among this process's descendants.
var adoptOrphans sync.Once
