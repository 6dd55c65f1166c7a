package testkit

import (
	"os"
	"path/filepath"
	"testing"
)

// WorldExecutable copies this test binary (the init helper, for the backends' tests) where any
// uid may execute it, for t's duration, and returns its path: a template's helper runs as an
// unprivileged host uid, and the build directory go test runs the binary from is its user's
// alone.
func WorldExecutable(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mcp-sandbox-init-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	exe, err := os.ReadFile("/proc/self/exe")
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "init"), exe, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "init")
}
