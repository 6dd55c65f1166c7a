//go:build linux

package jobobject

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// The Wine tests start Windows processes, which under Wine are this host's: they run in the
// tests' own pid namespace (as root), so none outlives the test binary.
func TestMain(m *testing.M) {
	gate.Main()
	os.Exit(m.Run())
}

// WinePrefixEnv names the Wine prefix the tests run in, prepared by .ci/run: Wine 8 (Debian
// 12's wine64) and, in its system32, the bcryptprimitives.dll the Go runtime needs
// (.ci/wine/bcryptprimitives.c).
const WinePrefixEnv = "MCP_SANDBOX_WINEPREFIX"

// The package's windows tests, cross-compiled and run under wine64: a job starts a program
// suspended, assigns and resumes it, and Probe's grades match what each hostile case showed.
// What Wine enforced is in the log.
func TestUnderWine(t *testing.T) {
	wine, err := exec.LookPath("wine64")
	if err != nil {
		wine = "/usr/lib/wine/wine64"
	}
	prefix := os.Getenv(WinePrefixEnv)
	shim := filepath.Join(prefix, "drive_c", "windows", "system32", "bcryptprimitives.dll")
	_, wineErr := os.Stat(wine)
	_, shimErr := os.Stat(shim)
	gate.Require(t, "wine", wineErr == nil && prefix != "" && shimErr == nil,
		"needs wine64 (apt-get install wine64) and "+WinePrefixEnv+" naming a prefix with the Go runtime's bcryptprimitives.dll shim, as .ci/run prepares")
	if !gate.InOwnPIDNamespace() {
		gate.Require(t, "hostile", false, "the Windows children run in the tests' own pid namespace only (root)")
	}
	prefix = testkit.OwnWinePrefix(t, prefix)
	exe := filepath.Join(t.TempDir(), "jobobject.test.exe")
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command, to build the windows tests: %v", err)
	}
	build := exec.Command(goBin, "test", "-c", "-o", exe, ".")
	build.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the windows tests: %v\n%s", err, out)
	}
	run := exec.Command(wine, exe, "-test.v", "-test.count=1")
	run.Env = append(os.Environ(), "WINEPREFIX="+prefix, "WINEDEBUG=-all")
	out, err := run.CombinedOutput()
	t.Logf("under %s:\n%s", wine, out)
	if err != nil || !strings.Contains(string(out), "\nPASS") {
		t.Fatalf("the windows tests under Wine: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: TestProbe") || !strings.Contains(string(out), "--- PASS: TestStartInAJob") {
		t.Fatalf("the job's tests did not run under Wine")
	}
}
