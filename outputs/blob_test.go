package outputs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func newStore(t *testing.T) (*BlobStore, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := OpenBlobStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
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

func TestBlobPutOpen(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	tests := []struct {
		name, content string
		max           int64
		wantErr       error
	}{
		{"empty", "", 10, nil},
		{"exact", "0123456789", 10, nil},
		{"lines", "a\nb\n", 100, nil},
		{"binary", "\x00\xff\n\x01", 100, nil},
		{"too large", "0123456789x", 10, ErrBlobTooLarge},
	}
	for _, tc := range tests {
		h, n, err := s.Put(ctx, "A", tc.name, "text/plain", strings.NewReader(tc.content), tc.max)
		if tc.wantErr != nil {
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("%s: Put = %v, want %v", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil || n != int64(len(tc.content)) {
			t.Fatalf("%s: Put = %d, %v", tc.name, n, err)
		}
		b, err := s.Open("A", h)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(b)
		b.Close()
		if string(got) != tc.content {
			t.Errorf("%s: content = %q", tc.name, got)
		}
		want := BlobInfo{Handle: h, Name: tc.name, ContentType: "text/plain", Size: int64(len(tc.content))}
		if d := cmp.Diff(want, b.Info, cmp.Comparer(func(a, b time.Time) bool { return true })); d != "" {
			t.Errorf("%s: info (-want +got):\n%s", tc.name, d)
		}
		if time.Since(b.Info.Created) > time.Minute {
			t.Errorf("%s: created %v", tc.name, b.Info.Created)
		}
	}
	if _, _, err := s.Put(ctx, "A", "x", "", strings.NewReader("x"), 0); err == nil {
		t.Error("Put with maxBytes 0 succeeded")
	}
	if _, _, err := s.Put(ctx, "A", strings.Repeat("n", 2000), "", strings.NewReader("x"), 10); err == nil {
		t.Error("Put with a 2000-byte name succeeded")
	}
	assertNoTemp(t, s)
}

func assertNoTemp(t *testing.T, s *BlobStore) {
	t.Helper()
	if left, _ := os.ReadDir(filepath.Join(s.dir, "tmp")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestBlobPutCancelled(t *testing.T) {
	s, _ := newStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := s.Put(ctx, "A", "x", "", strings.NewReader("data"), 10); err == nil {
		t.Error("Put under a cancelled context succeeded")
	}
	assertNoTemp(t, s)
}

// TestBlobTenantIsolation: tenant B asking for tenant A's handle gets exactly what it gets for
// a handle never issued, through every entry point.
func TestBlobTenantIsolation(t *testing.T) {
	s, _ := newStore(t)
	h, _, err := s.Put(t.Context(), "A", "stdout", "text/plain", strings.NewReader("secret\n"), 100)
	if err != nil {
		t.Fatal(err)
	}
	answer := func(tenant string, h Handle) string {
		var out []string
		_, err := s.Open(tenant, h)
		out = append(out, fmt.Sprint(err))
		_, err = s.Stat(tenant, h)
		out = append(out, fmt.Sprint(err))
		w, err := s.Lines(tenant, h, 0, 10)
		out = append(out, fmt.Sprint(w, err))
		m, err := s.Search(tenant, h, "secret", 10, 100)
		out = append(out, fmt.Sprint(m, err))
		return strings.Join(out, "|")
	}
	other := answer("B", h)
	never := answer("B", NewHandle())
	malformed := answer("B", "h_nope")
	if other != never || other != malformed {
		t.Errorf("another tenant's handle is distinguishable:\nother:     %s\nnever:     %s\nmalformed: %s", other, never, malformed)
	}
	if !strings.Contains(other, ErrNoBlob.Error()) {
		t.Errorf("answer = %s, want %v", other, ErrNoBlob)
	}
	if err := s.Delete("B", h); !errors.Is(err, ErrNoBlob) {
		t.Errorf("B deleting A's blob: %v", err)
	}
	if w, err := s.Lines("A", h, 0, 10); err != nil || w.Text != "secret\n" {
		t.Errorf("A's own read = %+v, %v", w, err)
	}
}

func TestBlobWindows(t *testing.T) {
	s, _ := newStore(t)
	var buf bytes.Buffer
	for i := range 5000 {
		fmt.Fprintf(&buf, "line %d\n", i)
	}
	h, _, err := s.Put(t.Context(), "A", "stdout", "text/plain", bytes.NewReader(buf.Bytes()), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Lines("A", h, 1000, 100)
	if err != nil {
		t.Fatal(err)
	}
	if w.Count != 100 || w.TotalLines != 5000 || !strings.HasPrefix(w.Text, "line 1000\n") || !strings.HasSuffix(w.Text, "line 1099\n") {
		t.Errorf("window = %d lines of %d, %q…", w.Count, w.TotalLines, w.Text[:20])
	}
	m, err := s.Search("A", h, `^line 42\d\d$`, 1000, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Matches) != 100 || m.Matches[0].Line != 4200 || m.Matches[0].Text != "line 4200" {
		t.Errorf("search = %d matches, first %+v", len(m.Matches), m.Matches[0])
	}
	if _, err := s.Search("A", h, `(`, 10, 10); !errors.Is(err, ErrBadPattern) {
		t.Errorf("bad pattern: %v", err)
	}
}

func TestBlobSweep(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	put := func(tenant string) Handle {
		h, _, err := s.Put(ctx, tenant, "x", "", strings.NewReader("data"), 100)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	old, oldB, young := put("A"), put("B"), put("A")
	past := time.Now().Add(-2 * time.Hour)
	for _, p := range []string{s.path("A", old), s.path("B", oldB)} {
		if err := os.Chtimes(p, past, past); err != nil {
			t.Fatal(err)
		}
	}
	stale := filepath.Join(s.dir, "tmp", "put-crashed")
	if err := os.WriteFile(stale, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.Chtimes(stale, past, past)

	open, err := s.Open("A", old) // a reader in progress keeps its blob
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()

	removed, freed, err := s.Sweep(ctx, time.Now().Add(-time.Hour))
	if err != nil || removed != 2 || freed <= 8 {
		t.Fatalf("Sweep = %d, %d, %v; want 2 blobs", removed, freed, err)
	}
	if _, err := s.Open("A", old); !errors.Is(err, ErrNoBlob) {
		t.Errorf("swept blob: %v", err)
	}
	if _, err := s.Open("B", oldB); !errors.Is(err, ErrNoBlob) {
		t.Errorf("swept blob of B: %v", err)
	}
	if _, err := s.Open("A", young); err != nil {
		t.Errorf("young blob: %v", err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale temporary file kept: %v", err)
	}
	if got, _ := io.ReadAll(open); string(got) != "data" {
		t.Errorf("open reader after sweep = %q", got)
	}
}

func TestRunSweeper(t *testing.T) {
	s, _ := newStore(t)
	h, _, err := s.Put(t.Context(), "A", "x", "", strings.NewReader("data"), 100)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { s.RunSweeper(ctx, time.Millisecond, 0, func(err error) { t.Error(err) }) })
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := s.Open("A", h); errors.Is(err, ErrNoBlob) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("sweeper never removed the blob")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	wg.Wait()
}

func TestBlobConcurrentPuts(t *testing.T) {
	s, _ := newStore(t)
	var wg sync.WaitGroup
	hs := make([]Handle, 32)
	for i := range hs {
		wg.Go(func() {
			h, _, err := s.Put(t.Context(), "A", "x", "", strings.NewReader(strings.Repeat("x", i)), 100)
			if err != nil {
				t.Error(err)
			}
			hs[i] = h
		})
	}
	wg.Wait()
	for i, h := range hs {
		if info, err := s.Stat("A", h); err != nil || info.Size != int64(i) {
			t.Errorf("blob %d: %+v, %v", i, info, err)
		}
	}
}
