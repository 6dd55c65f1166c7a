package outputs

import (
	"bytes"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

func TestCapture(t *testing.T) {
	type state struct {
		Bytes     string
		Size      int64
		Truncated bool
		Tail      string
	}
	tests := []struct {
		name                   string
		maxBytes, previewBytes int64
		writes                 []string
		want                   state
	}{
		{name: "nothing written", maxBytes: 8, previewBytes: 4, want: state{}},
		{
			name: "under both bounds", maxBytes: 8, previewBytes: 4, writes: []string{"ab", "c"},
			want: state{Bytes: "abc", Size: 3, Tail: "abc"},
		},
		{
			name: "exactly maxBytes", maxBytes: 8, previewBytes: 4, writes: []string{"abcd", "efgh"},
			want: state{Bytes: "abcdefgh", Size: 8, Tail: "efgh"},
		},
		{
			name: "over in one write", maxBytes: 8, previewBytes: 4, writes: []string{"abcdefghijkl"},
			want: state{Bytes: "abcdefgh", Size: 12, Truncated: true, Tail: "ijkl"},
		},
		{
			name: "one byte over", maxBytes: 8, previewBytes: 4, writes: []string{"abcdefgh", "i"},
			want: state{Bytes: "abcdefgh", Size: 9, Truncated: true, Tail: "fghi"},
		},
		{
			name: "ring wraps", maxBytes: 2, previewBytes: 5,
			writes: []string{"ab", "cd", "efg", "h", "ijklmn", "o", "pq"},
			want:   state{Bytes: "ab", Size: 17, Truncated: true, Tail: "mnopq"},
		},
		{
			name: "write longer than the ring", maxBytes: 2, previewBytes: 3,
			writes: []string{"abcd", "efghijklmnop"},
			want:   state{Bytes: "ab", Size: 16, Truncated: true, Tail: "nop"},
		},
		{
			name: "maxBytes smaller than previewBytes", maxBytes: 3, previewBytes: 10,
			writes: []string{"abcdef"},
			want:   state{Bytes: "abc", Size: 6, Truncated: true, Tail: "abcdef"},
		},
		{
			name: "keep nothing", maxBytes: 0, previewBytes: 4, writes: []string{"abcdef", "gh"},
			want: state{Size: 8, Truncated: true, Tail: "efgh"},
		},
		{
			name: "no tail", maxBytes: 4, previewBytes: 0, writes: []string{"abcdef"},
			want: state{Bytes: "abcd", Size: 6, Truncated: true},
		},
		{
			name: "negative bounds are zero", maxBytes: -1, previewBytes: -1, writes: []string{"abc"},
			want: state{Size: 3, Truncated: true},
		},
		{
			name: "empty writes", maxBytes: 4, previewBytes: 4, writes: []string{"", "ab", ""},
			want: state{Bytes: "ab", Size: 2, Tail: "ab"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCapture(tt.maxBytes, tt.previewBytes)
			for _, w := range tt.writes {
				if n, err := c.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v; want %d, nil", w, n, err, len(w))
				}
			}
			got := state{Bytes: string(c.Bytes()), Size: c.Size(), Truncated: c.Truncated(), Tail: string(c.Tail())}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("after writes %q (-want +got):\n%s", tt.writes, diff)
			}
		})
	}
}

func TestCapturePreviewIsPreviewOfTheStream(t *testing.T) {
	var stream bytes.Buffer
	for i := range 3000 {
		stream.WriteString(strings.Repeat("é€😀", i%5) + "line\n")
	}
	all := stream.Bytes()
	c := NewCapture(10_000, 4_000)
	if _, err := io.Copy(c, onlyReader{bytes.NewReader(all)}); err != nil {
		t.Fatal(err)
	}
	if got, want := c.Preview(), Preview(all, all, int64(len(all)), 4_000); got != want {
		t.Errorf("Capture.Preview() = %q\nwant Preview of the stream = %q", got, want)
	}
	if !bytes.Equal(c.Bytes(), all[:10_000]) || c.Size() != int64(len(all)) || !c.Truncated() {
		t.Errorf("Capture kept %d bytes of %d, Truncated() = %v; want the first 10000 of %d, true",
			len(c.Bytes()), c.Size(), c.Truncated(), len(all))
	}
}

// onlyReader hides WriterTo, so io.Copy writes in its own chunks.
type onlyReader struct{ io.Reader }

func TestCaptureBytesIsStable(t *testing.T) {
	c := NewCapture(1<<20, 16)
	c.Write([]byte("first"))
	b := c.Bytes()
	c.Write(bytes.Repeat([]byte("x"), 100_000)) // forces the kept buffer to grow
	if string(b) != "first" {
		t.Errorf("Bytes() changed under later writes: %q", b)
	}
	if cap(b) != len(b) {
		t.Errorf("cap(Bytes()) = %d, want %d, so an append cannot scribble on the buffer", cap(b), len(b))
	}
}

func TestCaptureConcurrentReaders(t *testing.T) {
	c := NewCapture(1<<10, 64)
	var wg sync.WaitGroup
	done := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			var last int64
			for {
				select {
				case <-done:
					return
				default:
				}
				s := c.Size()
				if s < last {
					t.Errorf("Size went backwards: %d after %d", s, last)
					return
				}
				last = s
				_ = c.Preview()
				_ = c.Truncated()
			}
		})
	}
	chunk := bytes.Repeat([]byte("y"), 100)
	for range 1000 {
		c.Write(chunk)
	}
	close(done)
	wg.Wait()
	if c.Size() != 100_000 {
		t.Errorf("Size() = %d, want 100000", c.Size())
	}
}

// TestCaptureMemoryIsBounded feeds a gigabyte and checks that what it cost is about maxBytes,
// not the stream.
func TestCaptureMemoryIsBounded(t *testing.T) {
	if testing.Short() {
		gate.AppliesOnly(t, false, "writes 1 GiB; skipped in -short mode")
	}
	const (
		maxBytes  = 8 << 20
		chunkSize = 64 << 10
		streamLen = 1 << 30
		ceiling   = 24 << 20 // kept (8 MiB) plus the buffers it outgrew, with room to spare
	)
	chunk := bytes.Repeat([]byte("0123456789abcdef"), chunkSize/16)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := NewCapture(maxBytes, 4_000)
	for range streamLen / chunkSize {
		c.Write(chunk)
	}
	p := c.Preview()
	runtime.ReadMemStats(&after)

	grown := after.TotalAlloc - before.TotalAlloc
	t.Logf("capturing 1 GiB allocated %d KiB", grown>>10)
	if grown > ceiling {
		t.Errorf("capturing 1 GiB allocated %d MiB in all, want under %d MiB", grown>>20, ceiling>>20)
	}
	if c.Size() != streamLen || len(c.Bytes()) != maxBytes || !c.Truncated() {
		t.Errorf("Size() = %d, len(Bytes()) = %d, Truncated() = %v; want %d, %d, true",
			c.Size(), len(c.Bytes()), c.Truncated(), streamLen, maxBytes)
	}
	// The stream repeats chunk, so its first and last 4000 bytes are chunk's.
	if want := Preview(chunk[:4_000], chunk[chunkSize-4_000:], streamLen, 4_000); p != want {
		t.Errorf("Preview() = %q, want %q", p, want)
	}
}
