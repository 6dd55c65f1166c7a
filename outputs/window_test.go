package outputs

import (
	"errors"
	"regexp/syntax"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLines(t *testing.T) {
	tests := []struct {
		name          string
		data          string
		offset, limit int
		want          Window
	}{
		{name: "empty output", data: "", offset: 0, limit: 10, want: Window{}},
		{
			name: "all lines", data: "a\nb\nc", offset: 0, limit: 10,
			want: Window{Text: "a\nb\nc", Count: 3, TotalLines: 3},
		},
		{
			name: "first lines", data: "a\nb\nc\n", offset: 0, limit: 2,
			want: Window{Text: "a\nb\n", Count: 2, TotalLines: 3, More: true},
		},
		{
			name: "middle", data: "a\nb\nc\nd\n", offset: 1, limit: 2,
			want: Window{Text: "b\nc\n", Offset: 1, Count: 2, TotalLines: 4, More: true},
		},
		{
			name: "last line without newline", data: "a\nb\nc", offset: 2, limit: 5,
			want: Window{Text: "c", Offset: 2, Count: 1, TotalLines: 3},
		},
		{
			name: "trailing newline is not a line", data: "a\nb\n", offset: 1, limit: 5,
			want: Window{Text: "b\n", Offset: 1, Count: 1, TotalLines: 2},
		},
		{
			name: "empty lines count", data: "\n\nx\n", offset: 0, limit: 2,
			want: Window{Text: "\n\n", Count: 2, TotalLines: 3, More: true},
		},
		{
			name: "offset at the end", data: "a\nb\n", offset: 2, limit: 5,
			want: Window{Offset: 2, TotalLines: 2},
		},
		{
			name: "offset past the end", data: "a\nb\n", offset: 50, limit: 5,
			want: Window{Offset: 50, TotalLines: 2},
		},
		{
			name: "limit zero tells the line count", data: "a\nb\n", offset: 0, limit: 0,
			want: Window{TotalLines: 2, More: true},
		},
		{
			name: "invalid UTF-8 is rendered", data: "a\xffb\nc\n", offset: 0, limit: 1,
			want: Window{Text: "a\uFFFDb\n", Count: 1, TotalLines: 2, More: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Lines([]byte(tt.data), tt.offset, tt.limit)
			if err != nil {
				t.Fatalf("Lines(%q, %d, %d): %v", tt.data, tt.offset, tt.limit, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Lines(%q, %d, %d) mismatch (-want +got):\n%s", tt.data, tt.offset, tt.limit, diff)
			}
		})
	}
}

func TestLinesLimitIsCapped(t *testing.T) {
	data := []byte(strings.Repeat("x\n", MaxWindowLines+5))
	got, err := Lines(data, 0, MaxWindowLines*3)
	if err != nil {
		t.Fatal(err)
	}
	if got.Count != MaxWindowLines || !got.More || got.TotalLines != MaxWindowLines+5 {
		t.Errorf("Lines(%d lines, limit %d): Count %d, More %v, TotalLines %d; want %d, true, %d",
			MaxWindowLines+5, MaxWindowLines*3, got.Count, got.More, got.TotalLines, MaxWindowLines, MaxWindowLines+5)
	}
}

func TestLinesRejectsNegative(t *testing.T) {
	for _, c := range []struct{ offset, limit int }{{-1, 1}, {0, -1}} {
		if _, err := Lines([]byte("a\n"), c.offset, c.limit); !errors.Is(err, ErrBadWindow) {
			t.Errorf("Lines(offset %d, limit %d) error = %v, want ErrBadWindow", c.offset, c.limit, err)
		}
	}
}

func TestSearch(t *testing.T) {
	const log = "start\nerror: disk full\nok\nerror: retry\nERROR upper\ndone"
	tests := []struct {
		name                 string
		data, pattern        string
		maxMatches, maxBytes int
		want                 Matches
	}{
		{
			name: "matches with line numbers", data: log, pattern: "error", maxMatches: 10, maxBytes: 1000,
			want: Matches{TotalLines: 6, Matches: []Match{{Line: 1, Text: "error: disk full"}, {Line: 3, Text: "error: retry"}}},
		},
		{
			name: "flags in the pattern", data: log, pattern: "(?i)^error", maxMatches: 10, maxBytes: 1000,
			want: Matches{TotalLines: 6, Matches: []Match{
				{Line: 1, Text: "error: disk full"}, {Line: 3, Text: "error: retry"}, {Line: 4, Text: "ERROR upper"},
			}},
		},
		{
			name: "anchors are per line", data: log, pattern: "^ok$", maxMatches: 10, maxBytes: 1000,
			want: Matches{TotalLines: 6, Matches: []Match{{Line: 2, Text: "ok"}}},
		},
		{
			name: "no match spans lines", data: log, pattern: `full\nok`, maxMatches: 10, maxBytes: 1000,
			want: Matches{TotalLines: 6},
		},
		{name: "no match", data: log, pattern: "panic", maxMatches: 10, maxBytes: 1000, want: Matches{TotalLines: 6}},
		{
			name: "bounded by count", data: log, pattern: "error", maxMatches: 1, maxBytes: 1000,
			want: Matches{TotalLines: 6, Truncated: true, Matches: []Match{{Line: 1, Text: "error: disk full"}}},
		},
		{
			name: "count bound met exactly", data: log, pattern: "error", maxMatches: 2, maxBytes: 1000,
			want: Matches{TotalLines: 6, Matches: []Match{{Line: 1, Text: "error: disk full"}, {Line: 3, Text: "error: retry"}}},
		},
		{
			name: "zero matches asked: only whether any exists", data: log, pattern: "error", maxMatches: 0, maxBytes: 1000,
			want: Matches{TotalLines: 6, Truncated: true},
		},
		{
			// 16 bytes for the first line leave 4: the second is clipped around its match.
			name: "bounded by bytes", data: log, pattern: "error", maxMatches: 10, maxBytes: 20,
			want: Matches{TotalLines: 6, Truncated: true, Matches: []Match{
				{Line: 1, Text: "error: disk full"}, {Line: 3, Text: "erro", Clipped: true},
			}},
		},
		{
			name: "bytes bound met exactly", data: log, pattern: "error", maxMatches: 10, maxBytes: 28,
			want: Matches{TotalLines: 6, Matches: []Match{{Line: 1, Text: "error: disk full"}, {Line: 3, Text: "error: retry"}}},
		},
		{
			// Budget 8: two bytes before the match, then forward.
			name: "long line clipped around the match", data: "aaaaaaaaaaNEEDLEbbbbbbbbbb", pattern: "NEEDLE",
			maxMatches: 10, maxBytes: 8,
			want: Matches{TotalLines: 1, Truncated: true, Matches: []Match{{Line: 0, Text: "aaNEEDLE", Clipped: true}}},
		},
		{
			// The line ends before the budget: the excerpt reaches further back.
			name: "clip near the end of the line", data: "aaaaaaaaaaNEEDLE", pattern: "NEEDLE",
			maxMatches: 10, maxBytes: 10,
			want: Matches{TotalLines: 1, Truncated: true, Matches: []Match{{Line: 0, Text: "aaaaNEEDLE", Clipped: true}}},
		},
		{
			// Clipping never cuts a rune: 8 bytes hold two euros, not two and two thirds.
			name: "clip on rune boundaries", data: strings.Repeat("€", 10), pattern: "€",
			maxMatches: 10, maxBytes: 8,
			want: Matches{TotalLines: 1, Truncated: true, Matches: []Match{{Line: 0, Text: "€€", Clipped: true}}},
		},
		{
			name: "invalid UTF-8 is rendered", data: "a\xffb\n", pattern: "b", maxMatches: 10, maxBytes: 100,
			want: Matches{TotalLines: 1, Matches: []Match{{Line: 0, Text: "a\uFFFDb"}}},
		},
		{
			name: "empty pattern matches every line", data: "x\n\ny\n", pattern: "", maxMatches: 10, maxBytes: 100,
			want: Matches{TotalLines: 3, Matches: []Match{{Line: 0, Text: "x"}, {Line: 1, Text: ""}, {Line: 2, Text: "y"}}},
		},
		{name: "empty output", data: "", pattern: "", maxMatches: 10, maxBytes: 100, want: Matches{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Search([]byte(tt.data), tt.pattern, tt.maxMatches, tt.maxBytes)
			if err != nil {
				t.Fatalf("Search(%q): %v", tt.pattern, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Search(%q, %d, %d) mismatch (-want +got):\n%s", tt.pattern, tt.maxMatches, tt.maxBytes, diff)
			}
		})
	}
}

func TestSearchBadPattern(t *testing.T) {
	_, err := Search([]byte("a\n"), "(unclosed", 10, 100)
	if !errors.Is(err, ErrBadPattern) {
		t.Fatalf("Search(%q) error = %v, want ErrBadPattern", "(unclosed", err)
	}
	var syntaxErr *syntax.Error
	if !errors.As(err, &syntaxErr) {
		t.Errorf("Search error %v does not carry the regexp error", err)
	}
	if want := "bad pattern: error parsing regexp: missing closing ): `(unclosed`"; err.Error() != want {
		t.Errorf("error text = %q, want %q", err.Error(), want)
	}

	long := strings.Repeat("a", MaxPatternBytes+1)
	if _, err := Search([]byte("a\n"), long, 10, 100); !errors.Is(err, ErrBadPattern) {
		t.Errorf("Search(%d-byte pattern) error = %v, want ErrBadPattern", len(long), err)
	}
}

func TestSearchRejectsNegativeBounds(t *testing.T) {
	for _, c := range []struct{ matches, bytes int }{{-1, 10}, {10, -1}} {
		if _, err := Search([]byte("a\n"), "a", c.matches, c.bytes); !errors.Is(err, ErrBadWindow) {
			t.Errorf("Search(maxMatches %d, maxBytes %d) error = %v, want ErrBadWindow", c.matches, c.bytes, err)
		}
	}
}

// TestSearchHostilePattern: a pattern that backtracking engines take exponential time on is
// linear under RE2. The test passes by finishing.
func TestSearchHostilePattern(t *testing.T) {
	data := []byte(strings.Repeat(strings.Repeat("a", 5000)+"\n", 200))
	got, err := Search(data, `^(a+)+$b`, 10, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Matches) != 0 {
		t.Errorf("Search matched %d lines, want none", len(got.Matches))
	}
}

func FuzzWindows(f *testing.F) {
	f.Add([]byte("a\nb\n\nc"), uint8(2), "b|c", uint8(3), uint16(5))
	f.Add([]byte("\xff\n€€€\nx"), uint8(1), "€", uint8(1), uint16(4))
	f.Fuzz(func(t *testing.T, data []byte, limit uint8, pattern string, maxMatches uint8, maxBytes uint16) {
		// Windows of any size, read one after another, give back the whole output.
		step := int(limit%16) + 1
		var all strings.Builder
		for offset := 0; ; offset += step {
			w, err := Lines(data, offset, step)
			if err != nil {
				t.Fatal(err)
			}
			all.WriteString(w.Text)
			if w.Count > step || (w.More && w.Count != step) {
				t.Fatalf("Lines(offset %d, limit %d) = Count %d, More %v", offset, step, w.Count, w.More)
			}
			if !w.More {
				break
			}
		}
		if all.String() != text(data) {
			t.Fatalf("windows give %q, want %q", all.String(), text(data))
		}

		m, err := Search(data, pattern, int(maxMatches), int(maxBytes))
		if errors.Is(err, ErrBadPattern) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Matches) > int(maxMatches) {
			t.Fatalf("%d matches, more than %d", len(m.Matches), maxMatches)
		}
		size, last := 0, -1
		for _, match := range m.Matches {
			size += len(match.Text)
			if match.Line <= last || match.Line >= m.TotalLines {
				t.Fatalf("match on line %d after line %d, of %d lines", match.Line, last, m.TotalLines)
			}
			last = match.Line
		}
		if size > int(maxBytes) {
			t.Fatalf("matches hold %d bytes, more than %d", size, maxBytes)
		}
	})
}
