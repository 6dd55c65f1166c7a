package testkit

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// OwnWinePrefix is a copy of prefix for this test alone, its files hard links to prefix's but the
// registry's (which the wine server rewrites): Wine runs one server per prefix (Debian's
// records it in the prefix's wineserver file), and a server started outside this test's pid
// namespace (another package's Wine test, running beside this one) cannot serve the
// processes inside it, which then hang. When the copy cannot be made (another file system),
// the shared prefix is used as it is, and the log says so. The copy's server is ended with
// the test.
func OwnWinePrefix(t *testing.T, prefix string) string {
	t.Helper()
	own := filepath.Join(t.TempDir(), "wineprefix")
	if out, err := exec.Command("cp", "-al", prefix, own).CombinedOutput(); err != nil {
		t.Logf("sharing the Wine prefix %s: no linked copy (%v: %s)", prefix, err, out)
		return prefix
	}
	_ = os.Remove(filepath.Join(own, "wineserver"))
	regs, _ := filepath.Glob(filepath.Join(prefix, "*.reg"))
	for _, r := range regs {
		b, err := os.ReadFile(r)
		dst := filepath.Join(own, filepath.Base(r))
		if err == nil {
			_ = os.Remove(dst)
			err = os.WriteFile(dst, b, 0o644)
		}
		if err != nil {
			t.Fatalf("copying the prefix's registry: %v", err)
		}
	}
	t.Cleanup(func() {
		kill := exec.Command("/usr/lib/wine/wineserver", "-k")
		kill.Env = append(os.Environ(), "WINEPREFIX="+own)
		_ = kill.Run()
	})
	return own
}
