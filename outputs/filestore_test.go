package outputs

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func newStore(t *testing.T) *FileStore {
	t.Helper()
	s, err := OpenFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestHandle(t *testing.T) {
	seen := map[Handle]bool{}
	for range 1000 {
		h := NewHandle()
		if !h.Valid() || seen[h] {
			t.Fatalf("handle %q invalid or repeated", h)
		}
		seen[h] = true
	}
	for _, h := range []Handle{"", "h_", "h_0123", "x_0123456789abcdef0123456789abcdef",
		"h_0123456789ABCDEF0123456789abcdef", "h_0123456789abcdef0123456789abcde/", "h_../../../../etc/passwd",
		"h_0123456789abcdef0123456789abcdef0"} {
		if h.Valid() {
			t.Errorf("%q is valid", h)
		}
	}
}

// TestFilePutLeavesNoTemporary: a Put that fails, however it fails, removes its temporary file.
func TestFilePutLeavesNoTemporary(t *testing.T) {
	s := newStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := s.Put(ctx, "A", "x", "", strings.NewReader("data"), 10); err == nil {
		t.Error("Put under a cancelled context succeeded")
	}
	if _, _, err := s.Put(t.Context(), "A", "x", "", strings.NewReader("0123456789x"), 10); err == nil {
		t.Error("Put over maxBytes succeeded")
	}
	if _, _, err := s.Put(t.Context(), "A", "x", "", strings.NewReader("fine"), 10); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(filepath.Join(s.dir, "tmp")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestFileSweepAgesByModTime: a blob file is as old as its last write, and a crashed Put's
// temporary file is swept (and not counted) once old.
func TestFileSweepAgesByModTime(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	old, _, err := s.Put(ctx, "A", "x", "", strings.NewReader("data"), 100)
	if err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(s.path("A", old), past, past); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(s.dir, "tmp", "put-crashed")
	if err := os.WriteFile(stale, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.Chtimes(stale, past, past)
	open, err := s.Open(ctx, "A", old)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	removed, _, err := s.Sweep(ctx, time.Now().Add(-time.Hour))
	if err != nil || removed != 1 {
		t.Fatalf("Sweep = %d, %v; want the one old blob", removed, err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale temporary file kept: %v", err)
	}
	if got, _ := io.ReadAll(open); string(got) != "data" {
		t.Errorf("open reader after sweep = %q", got)
	}
}
