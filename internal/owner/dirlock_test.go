//go:build unix

package owner

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLockLiveness: a held lock is not gone to another opener (flock is per open file, so a
// second open in this process stands for another process); a lock whose holder closed its file
// without releasing it (as a killed process does) is gone, and the claim holds it until unlock,
// so a concurrent claim does not find it gone too; a released lock leaves no file and is gone.
func TestLockLiveness(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "owners")
	a, err := Hold(dir, "o_a")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("lock dir: %v, %v; want 0700", st, err)
	}
	if _, err := Hold(dir, "o_a"); err == nil {
		t.Fatal("a second Hold of a held id succeeded")
	}
	if gone, _, err := Claim(dir, "o_a"); gone || err != nil {
		t.Fatalf("Claim of a held lock = %v, %v; want alive", gone, err)
	}

	b, err := Hold(dir, "o_b")
	if err != nil {
		t.Fatal(err)
	}
	b.file.Close() // dies: the kernel drops the lock, the file stays
	gone, unlock, err := Claim(dir, "o_b")
	if !gone || err != nil {
		t.Fatalf("Claim of a dead holder's lock = %v, %v; want gone", gone, err)
	}
	if again, _, err := Claim(dir, "o_b"); again || err != nil {
		t.Fatalf("a second Claim while the first holds = %v, %v; want not gone", again, err)
	}
	unlock()
	if _, err := os.Stat(filepath.Join(dir, "o_b.lock")); !os.IsNotExist(err) {
		t.Errorf("unlock left the dead holder's file: %v", err)
	}

	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	if gone, _, err := Claim(dir, "o_a"); !gone || err != nil {
		t.Fatalf("Claim of a released lock = %v, %v; want gone", gone, err)
	}
	for _, bad := range []string{"", "../o_a", "x/y"} {
		if _, _, err := Claim(dir, bad); err == nil {
			t.Errorf("Claim(%q) took a bad id", bad)
		}
	}
}
