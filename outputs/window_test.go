package outputs

import (
	"bytes"
	"errors"
	"io"
	"math"
	"regexp"
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
			for _, buf := range bufferSizes {
				got, err := linesAt(strings.NewReader(tt.data), int64(len(tt.data)), tt.offset, tt.limit, math.MaxInt, buf)
				if err != nil {
					t.Fatalf("Lines(%q, %d, %d), buffer %d: %v", tt.data, tt.offset, tt.limit, buf, err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("Lines(%q, %d, %d), buffer %d, mismatch (-want +got):\n%s", tt.data, tt.offset, tt.limit, buf, diff)
				}
			}
		})
	}
}

// bufferSizes are the scan buffers the table tests run with: bufio's smallest, which sends
// most lines of the tables down the long-line path, one in between, and the default.
var bufferSizes = []int{16, 24, scanBufferBytes}

// TestWindowsOverLongLines: a line far longer than the scan buffer is windowed, matched and
// clipped as it would be in memory, and a window over the byte ceiling is refused.
func TestWindowsOverLongLines(t *testing.T) {
	long := strings.Repeat("x", 300_000) + "NEEDLE" + strings.Repeat("y", 300_000)
	data := "first\n" + long + "\nlast"
	r := strings.NewReader(data)
	w, err := linesAt(r, int64(len(data)), 1, 1, 1<<20, 4096)
	if err != nil || w.Text != long+"\n" || w.TotalLines != 3 || !w.More {
		t.Errorf("window over the long line: %d bytes, %d lines, more %v, %v", len(w.Text), w.TotalLines, w.More, err)
	}
	if _, err := linesAt(r, int64(len(data)), 0, 2, 1000, 4096); !errors.Is(err, ErrBadWindow) {
		t.Errorf("a window over its byte ceiling: %v, want ErrBadWindow", err)
	}
	m, err := searchAt(r, int64(len(data)), "NEEDLE", 10, 100, 4096)
	want := Matches{TotalLines: 3, Truncated: true, Matches: []Match{{Line: 1, Text: strings.Repeat("x", 25) + "NEEDLE" + strings.Repeat("y", 69), Clipped: true}}}
	if err != nil || !cmp.Equal(m, want) {
		t.Errorf("search = %+v, %v; want %+v", m, err, want)
	}
	m, err = searchAt(r, int64(len(data)), "NEEDLE", 10, 1<<20, 4096)
	if err != nil || len(m.Matches) != 1 || m.Matches[0].Text != long || m.Matches[0].Clipped || m.Truncated {
		t.Errorf("search with room for the whole line: %d matches, %v", len(m.Matches), err)
	}
}

// TestWindowsReadErrors: a read that fails mid-line is an error, not a shorter output.
func TestWindowsReadErrors(t *testing.T) {
	data := strings.Repeat("a", 100) + "\nNEEDLE\n"
	r := failingAt{r: strings.NewReader(data), at: 50}
	if _, err := linesAt(r, int64(len(data)), 0, 10, 1<<20, 16); !errors.Is(err, errRead) {
		t.Errorf("Lines: %v, want the read error", err)
	}
	if _, err := searchAt(r, int64(len(data)), "a$", 10, 1<<20, 16); !errors.Is(err, errRead) {
		t.Errorf("Search: %v, want the read error", err)
	}
}

var errRead = errors.New("read failed")

type failingAt struct {
	r  io.ReaderAt
	at int64
}

func (f failingAt) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.at {
		n, _ := f.r.ReadAt(p[:max(f.at-off, 0)], off)
		return n, errRead
	}
	return f.r.ReadAt(p, off)
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
			for _, buf := range bufferSizes {
				got, err := searchAt(strings.NewReader(tt.data), int64(len(tt.data)), tt.pattern, tt.maxMatches, tt.maxBytes, buf)
				if err != nil {
					t.Fatalf("Search(%q), buffer %d: %v", tt.pattern, buf, err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("Search(%q, %d, %d), buffer %d, mismatch (-want +got):\n%s", tt.pattern, tt.maxMatches, tt.maxBytes, buf, diff)
				}
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

		for _, buf := range bufferSizes {
			offset := int(limit) % 8
			got, err := linesAt(bytes.NewReader(data), int64(len(data)), offset, step, math.MaxInt, buf)
			want := linesInMemory(data, offset, step)
			if err != nil || !cmp.Equal(got, want) {
				t.Fatalf("buffer %d: Lines(%d, %d) = %+v, %v; in memory %+v", buf, offset, step, got, err, want)
			}
		}

		m, err := Search(data, pattern, int(maxMatches), int(maxBytes))
		if errors.Is(err, ErrBadPattern) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		re := regexp.MustCompile(pattern)
		for _, buf := range bufferSizes {
			got, err := searchAt(bytes.NewReader(data), int64(len(data)), pattern, int(maxMatches), int(maxBytes), buf)
			want := searchInMemory(data, re, int(maxMatches), int(maxBytes))
			if err != nil || !cmp.Equal(got, want) {
				t.Fatalf("buffer %d: Search = %+v, %v; in memory %+v", buf, got, err, want)
			}
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

// linesInMemory and searchInMemory are the windows as first written, over a whole output in
// memory: the reference the streaming ones are fuzzed against.
func linesInMemory(data []byte, offset, limit int) Window {
	limit = min(limit, MaxWindowLines)
	w := Window{Offset: offset, TotalLines: lineCount(data)}
	if offset >= w.TotalLines {
		return w
	}
	start := 0
	for range offset {
		start = lineEnd(data, start)
	}
	end := start
	for w.Count < limit && end < len(data) {
		end = lineEnd(data, end)
		w.Count++
	}
	w.Text = text(data[start:end])
	w.More = offset+w.Count < w.TotalLines
	return w
}

func searchInMemory(data []byte, re *regexp.Regexp, maxMatches, maxBytes int) Matches {
	maxMatches = min(maxMatches, MaxWindowLines)
	res := Matches{TotalLines: lineCount(data)}
	left := maxBytes
	for line, start := 0, 0; start < len(data); line++ {
		next := lineEnd(data, start)
		l := data[start:next]
		if len(l) > 0 && l[len(l)-1] == '\n' {
			l = l[:len(l)-1]
		}
		start = next
		if !re.Match(l) {
			continue
		}
		if len(res.Matches) == maxMatches || left == 0 {
			res.Truncated = true
			break
		}
		if width, over := renderedLen(l, left); !over {
			res.Matches = append(res.Matches, Match{Line: line, Text: text(l)})
			left -= width
			continue
		}
		at := re.FindIndex(l)[0]
		res.Matches = append(res.Matches, Match{Line: line, Text: excerpt(l, at, left), Clipped: true})
		res.Truncated = true
		break
	}
	return res
}

func lineCount(data []byte) int {
	n := bytes.Count(data, []byte("\n"))
	if len(data) > 0 && data[len(data)-1] != '\n' {
		n++
	}
	return n
}

func lineEnd(data []byte, start int) int {
	if i := bytes.IndexByte(data[start:], '\n'); i >= 0 {
		return start + i + 1
	}
	return len(data)
}
