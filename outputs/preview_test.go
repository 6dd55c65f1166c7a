package outputs

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestPreview(t *testing.T) {
	digits := strings.Repeat("0123456789", 10) // 100 bytes
	euros := strings.Repeat("€", 40)           // 120 bytes, 3 per rune
	const ffff = "\uFFFD"
	tests := []struct {
		name         string
		head, tail   string
		total        int64
		previewBytes int
		want         string
	}{
		{name: "empty", want: ""},
		{name: "zero budget", head: "abc", tail: "abc", total: 3, previewBytes: 0, want: ""},
		{name: "negative budget", head: "abc", tail: "abc", total: 3, previewBytes: -1, want: ""},
		{name: "fits", head: "hello", tail: "hello", total: 5, previewBytes: 10, want: "hello"},
		{name: "fits exactly", head: "hello", tail: "hello", total: 5, previewBytes: 5, want: "hello"},
		{
			// marker "…[elided 100 bytes]…" reserves 24; 16 left: head 10, tail 6.
			name: "ascii", head: digits, tail: digits, total: 100, previewBytes: 40,
			want: "0123456789…[elided 84 bytes]…456789",
		},
		{
			// 16 left: the head's 10 hold three euros (9), the tail gets 7, two euros (6).
			name: "multibyte at the cut", head: euros, tail: euros, total: 120, previewBytes: 40,
			want: "€€€…[elided 105 bytes]…€€",
		},
		{
			// Each invalid byte is one U+FFFD, three rendered bytes, one counted byte.
			name: "invalid bytes", head: strings.Repeat("\xff", 50), tail: strings.Repeat("\xff", 50),
			total: 50, previewBytes: 40,
			want: ffff + ffff + ffff + "…[elided 45 bytes]…" + ffff + ffff,
		},
		{
			name: "invalid bytes that fit", head: "a\xffb", tail: "a\xffb", total: 3, previewBytes: 5,
			want: "a" + ffff + "b",
		},
		{
			// 10 bytes, but 30 once rendered: elided although total < previewBytes.
			name: "invalid bytes that render too long", head: strings.Repeat("\xff", 10),
			tail: strings.Repeat("\xff", 10), total: 10, previewBytes: 29,
			want: ffff + "…[elided 8 bytes]…" + ffff,
		},
		{
			name: "literal U+FFFD is a valid rune", head: ffff + ffff, tail: ffff + ffff, total: 6,
			previewBytes: 6, want: ffff + ffff,
		},
		{name: "marker alone", head: digits, tail: digits, total: 100, previewBytes: 24, want: "…[elided 100 bytes]…"},
		{name: "smaller than the marker", head: digits, tail: digits, total: 100, previewBytes: 23, want: "…"},
		{name: "ellipsis exactly", head: digits, tail: digits, total: 100, previewBytes: 3, want: "…"},
		{name: "smaller than the ellipsis", head: digits, tail: digits, total: 100, previewBytes: 2, want: ""},
		{
			name: "head and tail of a longer stream", head: digits[:40], tail: digits[60:], total: 100,
			previewBytes: 40, want: "0123456789…[elided 84 bytes]…456789",
		},
		{
			name: "overlapping head and tail", head: "hello wor", tail: "world", total: 11,
			previewBytes: 100, want: "hello world",
		},
		{
			name: "adjacent head and tail", head: "hello ", tail: "world", total: 11,
			previewBytes: 11, want: "hello world",
		},
		{
			name: "head and tail do not cover the stream", head: "ab", tail: "yz", total: 10,
			previewBytes: 100, want: "ab…[elided 6 bytes]…yz",
		},
		{name: "nothing known", total: 5, previewBytes: 100, want: "…[elided 5 bytes]…"},
		{name: "total raised to what was given", head: "abc", tail: "abc", total: 1, previewBytes: 10, want: "abc"},
		{
			// The head stops before a rune that may continue past it; its bytes count in N.
			name: "head ends mid-rune", head: "ab\xe2\x82", tail: "yz", total: 1000,
			previewBytes: 100, want: "ab…[elided 996 bytes]…yz",
		},
		{
			// The tail's first bytes may finish a rune that began before it.
			name: "tail starts mid-rune", head: "ab", tail: "\x82\xacZ", total: 1000,
			previewBytes: 100, want: "ab…[elided 997 bytes]…Z",
		},
		{
			// A stream that ends in a broken rune shows it: nothing follows to complete it.
			name: "stream ends mid-rune", head: "ab\xe2\x82", tail: "ab\xe2\x82", total: 4,
			previewBytes: 100, want: "ab" + ffff + ffff,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Preview([]byte(tt.head), []byte(tt.tail), tt.total, tt.previewBytes)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Preview() mismatch (-want +got):\n%s", diff)
			}
			if tt.previewBytes > 0 && len(got) > tt.previewBytes {
				t.Errorf("len(Preview()) = %d, more than %d", len(got), tt.previewBytes)
			}
		})
	}
}

// TestPreviewHeadTwoThirds pins the split: two thirds of the room to the head.
func TestPreviewHeadTwoThirds(t *testing.T) {
	s := []byte(strings.Repeat("h", 5000) + strings.Repeat("t", 5000))
	got := Preview(s, s, int64(len(s)), 4000)
	room := 4000 - len(elisionMarker(int64(len(s))))
	want := strings.Repeat("h", room*2/3) + elisionMarker(int64(len(s)-room)) + strings.Repeat("t", room-room*2/3)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Preview() mismatch (-want +got):\n%s", diff)
	}
}

func FuzzPreview(f *testing.F) {
	f.Add([]byte("hello, world"), uint16(5), uint16(3))
	f.Add([]byte(strings.Repeat("0123456789", 100)), uint16(40), uint16(7))
	f.Add([]byte(strings.Repeat("€é😀a", 100)), uint16(41), uint16(64))
	f.Add([]byte("\xff\xfe\xe2\x82\xac\xe2\x82abc\xf0\x9f\x98"), uint16(30), uint16(1))
	f.Add([]byte("…[elided 3 bytes]…"+strings.Repeat("x", 50)), uint16(30), uint16(2))
	f.Add([]byte{}, uint16(0), uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, budget, chunk uint16) {
		previewBytes := int(budget % 2048)
		total := int64(len(data))
		got := Preview(data, data, total, previewBytes)

		if len(got) > max(previewBytes, 0) {
			t.Fatalf("len(preview) = %d > previewBytes %d", len(got), previewBytes)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("preview %q is not valid UTF-8", got)
		}
		if again := Preview(data, data, total, previewBytes); again != got {
			t.Fatalf("Preview is not deterministic: %q then %q", got, again)
		}
		if n, over := renderedLen(data, previewBytes); !over && previewBytes > 0 {
			if got != text(data) {
				t.Fatalf("stream of %d rendered bytes fits in %d but preview is %q", n, previewBytes, got)
			}
		} else if len(data) > 0 && previewBytes >= len(elisionMarker(total)) {
			if !elisionAccounts(data, got) {
				t.Fatalf("preview %q of %q: no marker whose N accounts for the bytes not shown", got, data)
			}
		} else if got != "" && got != tinyMarker {
			t.Fatalf("preview %q in %d bytes: want %q or empty", got, previewBytes, tinyMarker)
		}

		// Given previewBytes of head and of tail, the preview is that of the whole stream.
		k := min(len(data), previewBytes)
		if part := Preview(data[:k], data[len(data)-k:], total, previewBytes); part != got {
			t.Fatalf("Preview from %d-byte head and tail = %q, from the whole stream = %q", k, part, got)
		}

		// So is a Capture's, whatever the chunking, when it keeps at least previewBytes.
		c := NewCapture(int64(previewBytes)+int64(chunk%64), int64(previewBytes))
		step := int(chunk%97) + 1
		for rest := data; len(rest) > 0; {
			n := min(step, len(rest))
			c.Write(rest[:n])
			rest = rest[n:]
		}
		if p := c.Preview(); p != got {
			t.Fatalf("Capture.Preview() = %q, Preview() = %q", p, got)
		}
		if c.Size() != total {
			t.Fatalf("Capture.Size() = %d, want %d", c.Size(), total)
		}
		if want := data[len(data)-k:]; !bytes.Equal(c.Tail(), want) {
			t.Fatalf("Capture.Tail() = %q, want %q", c.Tail(), want)
		}
	})
}

// elisionAccounts reports whether preview is H + marker(N) + T for some marker in it, where H
// renders a prefix of data, T renders the suffix after N more bytes, and nothing else is left:
// every byte of data shown once or counted in N.
func elisionAccounts(data []byte, preview string) bool {
	for from := 0; ; {
		i := strings.Index(preview[from:], markerOpen)
		if i < 0 {
			return false
		}
		i += from
		from = i + 1
		digits, after, ok := strings.Cut(preview[i+len(markerOpen):], markerClose)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(digits)
		if err != nil || n < 0 {
			continue
		}
		head := preview[:i]
		h, used := 0, 0
		for h < len(data) && used < len(head) {
			size, width := nextRune(data[h:])
			h += size
			used += width
		}
		if text(data[:h]) != head || h+n > len(data) {
			continue
		}
		if text(data[h+n:]) == after {
			return true
		}
	}
}
