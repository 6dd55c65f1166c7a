package blobtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-sandbox/mcp-sandbox/outputs"
)

// RunBlobStoreContract is the behaviour every BlobStore must show. newStore returns a fresh,
// empty store; reopen returns a second handle on the same store as s, as another process or
// replica would open it. Implementations close what they return via t.Cleanup.
func RunBlobStoreContract(t *testing.T, newStore func(t *testing.T) outputs.BlobStore, reopen func(t *testing.T, s outputs.BlobStore) outputs.BlobStore) {
	t.Run("PutOpen", func(t *testing.T) { contractPutOpen(t, newStore(t)) })
	t.Run("BoundedSizes", func(t *testing.T) { contractBounds(t, newStore(t)) })
	t.Run("PutCancelledKeepsNothing", func(t *testing.T) { contractCancelled(t, newStore(t)) })
	t.Run("TenantScoping", func(t *testing.T) { contractTenants(t, newStore(t)) })
	t.Run("Windows", func(t *testing.T) { contractWindows(t, newStore(t)) })
	t.Run("StreamedNotHeld", func(t *testing.T) { contractStreamed(t, newStore(t)) })
	t.Run("ConcurrentPuts", func(t *testing.T) { contractConcurrentPuts(t, newStore(t)) })
	t.Run("SharedBetweenOpeners", func(t *testing.T) { s := newStore(t); contractShared(t, s, reopen(t, s)) })
	t.Run("ReadWhileDeleted", func(t *testing.T) { s := newStore(t); contractReadWhileDeleted(t, s, reopen(t, s)) })
	t.Run("Sweep", func(t *testing.T) { contractSweep(t, newStore(t)) })
	t.Run("ConcurrentSweeps", func(t *testing.T) { s := newStore(t); contractConcurrentSweeps(t, s, reopen(t, s)) })
	t.Run("RunSweeper", func(t *testing.T) { contractRunSweeper(t, newStore(t)) })
	t.Run("Quota", func(t *testing.T) { contractQuota(t, newStore(t)) })
}

func put(t *testing.T, s outputs.BlobStore, tenant, content string) outputs.Handle {
	t.Helper()
	h, n, err := s.Put(t.Context(), tenant, "stdout", "text/plain", strings.NewReader(content), 1<<20)
	if err != nil || n != int64(len(content)) {
		t.Fatalf("Put: %d, %v", n, err)
	}
	return h
}

func readAll(t *testing.T, s outputs.BlobStore, tenant string, h outputs.Handle) (string, outputs.BlobInfo) {
	t.Helper()
	b, err := s.Open(t.Context(), tenant, h)
	if err != nil {
		t.Fatalf("Open(%s): %v", h, err)
	}
	defer b.Close()
	got, err := io.ReadAll(b)
	if err != nil {
		t.Fatalf("reading %s: %v", h, err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	return string(got), b.Info
}

func contractPutOpen(t *testing.T, s outputs.BlobStore) {
	tests := []struct{ name, content string }{
		{"empty", ""},
		{"lines", "a\nb\n"},
		{"binary", "\x00\xff\n\x01"},
		{"large", strings.Repeat("0123456789abcdef", 100_000)}, // 1.6 MB: more than one piece of any store
	}
	for _, tc := range tests {
		h, n, err := s.Put(t.Context(), "A", tc.name, "text/plain", strings.NewReader(tc.content), 4<<20)
		if err != nil || n != int64(len(tc.content)) {
			t.Fatalf("%s: Put = %d, %v", tc.name, n, err)
		}
		if !h.Valid() {
			t.Errorf("%s: handle %q is not valid", tc.name, h)
		}
		got, info := readAll(t, s, "A", h)
		if got != tc.content {
			t.Errorf("%s: content differs: %d bytes back, %d put", tc.name, len(got), len(tc.content))
		}
		want := outputs.BlobInfo{Handle: h, Name: tc.name, ContentType: "text/plain", Size: int64(len(tc.content))}
		if d := cmp.Diff(want, info, cmp.Comparer(func(a, b time.Time) bool { return true })); d != "" {
			t.Errorf("%s: info (-want +got):\n%s", tc.name, d)
		}
		if time.Since(info.Created).Abs() > time.Minute {
			t.Errorf("%s: created %v", tc.name, info.Created)
		}
		if st, err := s.Stat(t.Context(), "A", h); err != nil || st != info {
			t.Errorf("%s: Stat = %+v, %v; want %+v", tc.name, st, err, info)
		}
		// A reader may start anywhere: the section reader's ReadAt.
		if len(tc.content) > 10 {
			b, err := s.Open(t.Context(), "A", h)
			if err != nil {
				t.Fatal(err)
			}
			p := make([]byte, 10)
			off := int64(len(tc.content) - 10)
			if _, err := b.ReadAt(p, off); err != nil && !errors.Is(err, io.EOF) || string(p) != tc.content[off:] {
				t.Errorf("%s: ReadAt(end-10) = %q, %v", tc.name, p, err)
			}
			b.Close()
		}
	}
}

func contractBounds(t *testing.T, s outputs.BlobStore) {
	ctx := t.Context()
	if _, n, err := s.Put(ctx, "A", "x", "", strings.NewReader("0123456789"), 10); err != nil || n != 10 {
		t.Errorf("Put of exactly maxBytes = %d, %v", n, err)
	}
	before := tenantBytes(t, s, "A")
	if _, _, err := s.Put(ctx, "A", "x", "", strings.NewReader("0123456789x"), 10); !errors.Is(err, outputs.ErrBlobTooLarge) {
		t.Errorf("Put over maxBytes = %v, want ErrBlobTooLarge", err)
	}
	big := io.LimitReader(zeros{}, 3<<20)
	if _, _, err := s.Put(ctx, "A", "x", "", big, 1<<20); !errors.Is(err, outputs.ErrBlobTooLarge) {
		t.Errorf("Put of 3 MiB over 1 MiB = %v, want ErrBlobTooLarge", err)
	}
	if after := tenantBytes(t, s, "A"); after != before {
		t.Errorf("tenant bytes %d → %d: a refused Put kept something", before, after)
	}
	if _, _, err := s.Put(ctx, "A", "x", "", strings.NewReader("x"), 0); err == nil {
		t.Error("Put with maxBytes 0 succeeded")
	}
	if _, _, err := s.Put(ctx, "A", strings.Repeat("n", 2000), "", strings.NewReader("x"), 10); err == nil {
		t.Error("Put with a 2000-byte name succeeded")
	}
	if _, _, err := s.Put(ctx, "A", "x", strings.Repeat("t", 2000), strings.NewReader("x"), 10); err == nil {
		t.Error("Put with a 2000-byte content type succeeded")
	}
}

func tenantBytes(t *testing.T, s outputs.BlobStore, tenant string) int64 {
	t.Helper()
	n, err := s.TenantBytes(t.Context(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func contractCancelled(t *testing.T, s outputs.BlobStore) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := s.Put(ctx, "A", "x", "", strings.NewReader("data"), 10); err == nil {
		t.Error("Put under a cancelled context succeeded")
	}
	// Cancelled mid-stream: the reader ends the context after the first megabyte.
	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	r := io.MultiReader(io.LimitReader(zeros{}, 1<<20), readerFunc(func(p []byte) (int, error) {
		cancel()
		return zeros{}.Read(p)
	}))
	if _, _, err := s.Put(ctx, "A", "x", "", io.LimitReader(r, 4<<20), 8<<20); err == nil {
		t.Error("Put whose context ended mid-stream succeeded")
	}
	if n := tenantBytes(t, s, "A"); n != 0 {
		t.Errorf("tenant bytes = %d after cancelled Puts, want 0", n)
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// contractTenants: tenant B asking for tenant A's handle gets exactly what it gets for a
// handle never issued, through every entry point, and A's bytes are not B's.
func contractTenants(t *testing.T, s outputs.BlobStore) {
	ctx := t.Context()
	h := put(t, s, "A", "secret\n")
	answer := func(tenant string, h outputs.Handle) string {
		var out []string
		_, err := s.Open(ctx, tenant, h)
		out = append(out, fmt.Sprint(err))
		_, err = s.Stat(ctx, tenant, h)
		out = append(out, fmt.Sprint(err))
		w, err := outputs.BlobLines(ctx, s, tenant, h, 0, 10)
		out = append(out, fmt.Sprint(w, err))
		m, err := outputs.BlobSearch(ctx, s, tenant, h, "secret", 10, 100)
		out = append(out, fmt.Sprint(m, err))
		return strings.Join(out, "|")
	}
	other := answer("B", h)
	never := answer("B", outputs.NewHandle())
	malformed := answer("B", "h_nope")
	if other != never || other != malformed {
		t.Errorf("another tenant's handle is distinguishable:\nother:     %s\nnever:     %s\nmalformed: %s", other, never, malformed)
	}
	if !strings.Contains(other, outputs.ErrNoBlob.Error()) {
		t.Errorf("answer = %s, want %v", other, outputs.ErrNoBlob)
	}
	for _, hd := range []outputs.Handle{h, outputs.NewHandle(), "h_nope"} {
		if err := s.Delete(ctx, "B", hd); !errors.Is(err, outputs.ErrNoBlob) {
			t.Errorf("B deleting %s: %v, want ErrNoBlob", hd, err)
		}
	}
	if w, err := outputs.BlobLines(ctx, s, "A", h, 0, 10); err != nil || w.Text != "secret\n" {
		t.Errorf("A's own read = %+v, %v", w, err)
	}
	if a, b := tenantBytes(t, s, "A"), tenantBytes(t, s, "B"); a < 7 || a > 7+4096 || b != 0 {
		t.Errorf("tenant bytes: A %d (want 7, plus at most 4 KiB of metadata), B %d (want 0)", a, b)
	}
	put(t, s, "B", "other")
	if total, err := s.TotalBytes(ctx); err != nil || total != tenantBytes(t, s, "A")+tenantBytes(t, s, "B") {
		t.Errorf("total bytes %d (%v), want A's and B's together", total, err)
	}
	if err := s.Delete(ctx, "A", h); err != nil {
		t.Errorf("A deleting its blob: %v", err)
	}
	if n := tenantBytes(t, s, "A"); n != 0 {
		t.Errorf("tenant bytes after delete = %d", n)
	}
	if err := s.Delete(ctx, "A", h); !errors.Is(err, outputs.ErrNoBlob) {
		t.Errorf("deleting twice: %v, want ErrNoBlob", err)
	}
}

func contractWindows(t *testing.T, s outputs.BlobStore) {
	ctx := t.Context()
	var buf bytes.Buffer
	for i := range 5000 {
		fmt.Fprintf(&buf, "line %d\n", i)
	}
	h := put(t, s, "A", buf.String())
	w, err := outputs.BlobLines(ctx, s, "A", h, 1000, 100)
	if err != nil {
		t.Fatal(err)
	}
	if w.Count != 100 || w.TotalLines != 5000 || !strings.HasPrefix(w.Text, "line 1000\n") || !strings.HasSuffix(w.Text, "line 1099\n") {
		t.Errorf("window = %d lines of %d, %.20q…", w.Count, w.TotalLines, w.Text)
	}
	m, err := outputs.BlobSearch(ctx, s, "A", h, `^line 42\d\d$`, 1000, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Matches) != 100 || m.Matches[0].Line != 4200 || m.Matches[0].Text != "line 4200" || m.TotalLines != 5000 {
		t.Errorf("search = %d matches of %d lines, first %+v", len(m.Matches), m.TotalLines, m.Matches)
	}
	if _, err := outputs.BlobSearch(ctx, s, "A", h, `(`, 10, 10); !errors.Is(err, outputs.ErrBadPattern) {
		t.Errorf("bad pattern: %v", err)
	}
	if _, err := outputs.BlobLines(ctx, s, "A", h, -1, 10); !errors.Is(err, outputs.ErrBadWindow) {
		t.Errorf("negative offset: %v", err)
	}
}

// streamedBytes is the size of the blob written and read as a stream: larger than what the
// heap may grow by while it is handled, so holding it whole fails the test.
const (
	streamedBytes = 32 << 20
	heapAllowance = 16 << 20
)

// contractStreamed puts a 32 MiB output from a reader that never holds it, then reads its last
// lines and searches it, while sampling the heap: none of the three may grow the heap by the
// blob's size.
func contractStreamed(t *testing.T, s outputs.BlobStore) {
	ctx := t.Context()
	const lineBytes = 64
	lines := streamedBytes / lineBytes
	var h outputs.Handle
	peak := heapPeak(t, func() {
		var n int64
		var err error
		h, n, err = s.Put(ctx, "A", "stdout", "text/plain", &lineMaker{lines: lines, width: lineBytes}, streamedBytes)
		if err != nil || n != streamedBytes {
			t.Fatalf("Put = %d, %v", n, err)
		}
	})
	t.Logf("heap growth: put %d KiB", peak>>10)
	var w outputs.Window
	peak = heapPeak(t, func() {
		var err error
		if w, err = outputs.BlobLines(ctx, s, "A", h, lines-3, 10); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("heap growth: last lines %d KiB", peak>>10)
	want := string(lineOf(lines-3, lineBytes)) + string(lineOf(lines-2, lineBytes)) + string(lineOf(lines-1, lineBytes))
	if w.TotalLines != lines || w.Count != 3 || w.Text != want || w.More {
		t.Errorf("last lines = %d of %d, more %v, %q", w.Count, w.TotalLines, w.More, w.Text)
	}
	var m outputs.Matches
	peak = heapPeak(t, func() {
		var err error
		if m, err = outputs.BlobSearch(ctx, s, "A", h, fmt.Sprintf("^%08d ", lines-1), 10, 1<<20); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("heap growth: search %d KiB", peak>>10)
	if len(m.Matches) != 1 || m.Matches[0].Line != lines-1 || m.TotalLines != lines {
		t.Errorf("search = %+v", m.Matches)
	}
	if info, err := s.Stat(ctx, "A", h); err != nil || info.Size != streamedBytes {
		t.Errorf("Stat = %+v, %v", info, err)
	}
}

// lineMaker yields lines "%08d xxx…\n" of width bytes, made as they are read.
type lineMaker struct {
	lines, width, next int
	pending            []byte
}

func (m *lineMaker) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(m.pending) == 0 {
			if m.next == m.lines {
				break
			}
			m.pending = lineOf(m.next, m.width)
			m.next++
		}
		c := copy(p[n:], m.pending)
		m.pending = m.pending[c:]
		n += c
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func lineOf(i, width int) []byte {
	l := fmt.Appendf(nil, "%08d ", i)
	l = append(l, bytes.Repeat([]byte("x"), width-len(l)-1)...)
	return append(l, '\n')
}

// heapPeak runs fn and returns by how much the live heap grew at most while it ran, sampled
// every millisecond, failing the test when that is over heapAllowance.
func heapPeak(t *testing.T, fn func()) uint64 {
	t.Helper()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapAlloc, ms.HeapAlloc
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	fn()
	close(done)
	wg.Wait()
	grew := peak - base
	if grew > heapAllowance {
		t.Errorf("the heap grew by %d MiB handling a %d MiB blob: more than %d MiB, so the blob was held whole",
			grew>>20, streamedBytes>>20, heapAllowance>>20)
	}
	return grew
}

func contractConcurrentPuts(t *testing.T, s outputs.BlobStore) {
	var wg sync.WaitGroup
	hs := make([]outputs.Handle, 32)
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
		if info, err := s.Stat(t.Context(), "A", h); err != nil || info.Size != int64(i) {
			t.Errorf("blob %d: %+v, %v", i, info, err)
		}
	}
}

// contractShared: what one opener (replica) writes, another reads, and what one deletes, the
// other no longer finds.
func contractShared(t *testing.T, a, b outputs.BlobStore) {
	h := put(t, a, "A", "made on one\n")
	if got, _ := readAll(t, b, "A", h); got != "made on one\n" {
		t.Errorf("read through the other opener: %q", got)
	}
	if w, err := outputs.BlobLines(t.Context(), b, "A", h, 0, 1); err != nil || w.Text != "made on one\n" {
		t.Errorf("window through the other opener: %+v, %v", w, err)
	}
	if err := b.Delete(t.Context(), "A", h); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Stat(t.Context(), "A", h); !errors.Is(err, outputs.ErrNoBlob) {
		t.Errorf("deleted through the other opener, then Stat: %v", err)
	}
}

// contractReadWhileDeleted: a blob deleted while open stays readable, whole, through the open
// Blob.
func contractReadWhileDeleted(t *testing.T, a, b outputs.BlobStore) {
	content := strings.Repeat("z", 3<<20)
	h := putExact(t, a, content)
	open, err := a.Open(t.Context(), "A", h)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	head := make([]byte, 10)
	if _, err := io.ReadFull(open, head); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(t.Context(), "A", h); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(open)
	if err != nil || len(head)+len(rest) != len(content) {
		t.Errorf("read after delete: %d bytes, %v; want %d", len(head)+len(rest), err, len(content))
	}
}

func putExact(t *testing.T, s outputs.BlobStore, content string) outputs.Handle {
	t.Helper()
	h, _, err := s.Put(t.Context(), "A", "x", "", strings.NewReader(content), int64(len(content)))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// contractSweep: blobs created before the cutoff go, of every tenant; younger ones stay.
func contractSweep(t *testing.T, s outputs.BlobStore) {
	ctx := t.Context()
	old, oldB := put(t, s, "A", "data"), put(t, s, "B", "data")
	cutoff := time.Now()
	time.Sleep(100 * time.Millisecond)
	young := put(t, s, "A", "data")
	removed, freed, err := s.Sweep(ctx, cutoff)
	if err != nil || removed != 2 || freed < 8 {
		t.Fatalf("Sweep = %d, %d, %v; want 2 blobs, at least 8 bytes", removed, freed, err)
	}
	for _, c := range []struct {
		tenant string
		h      outputs.Handle
	}{{"A", old}, {"B", oldB}} {
		if _, err := s.Stat(ctx, c.tenant, c.h); !errors.Is(err, outputs.ErrNoBlob) {
			t.Errorf("swept blob of %s: %v", c.tenant, err)
		}
	}
	if _, err := s.Stat(ctx, "A", young); err != nil {
		t.Errorf("young blob: %v", err)
	}
	if removed, _, err := s.Sweep(ctx, cutoff); err != nil || removed != 0 {
		t.Errorf("second Sweep = %d, %v; want nothing", removed, err)
	}
}

// contractConcurrentSweeps: six sweepers over two openers at once remove 20 old blobs, each
// counted once, and leave the young one.
func contractConcurrentSweeps(t *testing.T, a, b outputs.BlobStore) {
	ctx := t.Context()
	var hs []outputs.Handle
	for i := range 20 {
		hs = append(hs, put(t, a, fmt.Sprint("T", i%3), "old"))
	}
	cutoff := time.Now()
	time.Sleep(100 * time.Millisecond)
	young := put(t, b, "T0", "young")
	var mu sync.Mutex
	total := 0
	var wg sync.WaitGroup
	for i := range 6 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			n, _, err := s.Sweep(ctx, cutoff)
			if err != nil {
				t.Errorf("Sweep: %v", err)
			}
			mu.Lock()
			total += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if total != len(hs) {
		t.Errorf("sweepers removed %d blobs between them, want %d", total, len(hs))
	}
	for i, h := range hs {
		if _, err := a.Stat(ctx, fmt.Sprint("T", i%3), h); !errors.Is(err, outputs.ErrNoBlob) {
			t.Errorf("old blob %d: %v", i, err)
		}
	}
	if _, err := b.Stat(ctx, "T0", young); err != nil {
		t.Errorf("young blob: %v", err)
	}
}

func contractRunSweeper(t *testing.T, s outputs.BlobStore) {
	h := put(t, s, "A", "data")
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { outputs.RunSweeper(ctx, s, time.Millisecond, 0, func(err error) { t.Error(err) }) })
	defer func() { cancel(); wg.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := s.Stat(t.Context(), "A", h); errors.Is(err, outputs.ErrNoBlob) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the sweeper never removed the blob")
		}
		time.Sleep(time.Millisecond)
	}
}

// contractQuota: a store under WithQuota refuses, before keeping anything, a Put that would
// take its tenant or the whole store past the quota, and keeps those that fit, exactly, with
// Puts racing for the last of a tenant's room.
func contractQuota(t *testing.T, inner outputs.BlobStore) {
	ctx := t.Context()
	s := outputs.WithQuota(inner, outputs.StoreQuota{
		Tenant: func(tenant string) int64 {
			if tenant == "A" {
				return 10_000
			}
			return 0
		},
		Total: 40_000,
	})
	putN := func(tenant string, n int) error {
		_, _, err := s.Put(ctx, tenant, "stdout", "text/plain", strings.NewReader(strings.Repeat("x", n)), int64(n))
		return err
	}
	// Ten Puts of 3000 bytes race for A's 10,000: exactly three fit.
	var wg sync.WaitGroup
	var mu sync.Mutex
	kept, over := 0, 0
	for range 10 {
		wg.Go(func() {
			err := putN("A", 3000)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				kept++
			case errors.Is(err, outputs.ErrOverQuota):
				over++
			default:
				t.Errorf("Put: %v", err)
			}
		})
	}
	wg.Wait()
	if kept != 3 || over != 7 {
		t.Errorf("racing Puts: %d kept, %d over quota; want 3 and 7", kept, over)
	}
	before := tenantBytes(t, s, "A")
	if err := putN("A", 3000); !errors.Is(err, outputs.ErrOverQuota) || !strings.Contains(err.Error(), "max_stored_bytes") {
		t.Errorf("a Put past A's quota: %v, want ErrOverQuota naming max_stored_bytes", err)
	}
	if after := tenantBytes(t, s, "A"); after != before {
		t.Errorf("tenant bytes %d → %d: a Put over quota kept something", before, after)
	}
	if err := putN("A", 100); err != nil {
		t.Errorf("a Put within what is left: %v", err)
	}
	// B has no quota of its own; the store's total still bounds it.
	if err := putN("B", 20_000); err != nil {
		t.Errorf("B's Put within the total: %v", err)
	}
	err := putN("B", 15_000)
	if !errors.Is(err, outputs.ErrOverQuota) || strings.Contains(err.Error(), `"A"`) {
		t.Errorf("a Put past the total: %v, want ErrOverQuota not naming another tenant", err)
	}
}
