package outputs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"unicode/utf8"
)

const (
	// MaxWindowLines caps the lines in one window and the matches in one search.
	MaxWindowLines = 10_000
	// MaxPatternBytes caps a search pattern. RE2 is linear in its input whatever the pattern,
	// but a compiled pattern's size grows with its text.
	MaxPatternBytes = 4 << 10
)

// ErrBadWindow is wrapped by the error for a window or a bound that cannot be honoured, such as
// a negative offset. Its text is safe to show a model.
var ErrBadWindow = errors.New("bad window")

// ErrBadPattern is wrapped, together with the regexp error that explains it, by the error for a
// search pattern that does not compile or is too long. Its text is safe to show a model.
var ErrBadPattern = errors.New("bad pattern")

// A Window is a run of whole lines of an output. Lines are split after each "\n"; the last line
// may lack one. An empty output has no lines; "a\n" has one, as has "a".
type Window struct {
	// Text is the lines as written, each with its "\n", rendered as valid UTF-8 (an invalid
	// byte becomes U+FFFD).
	Text string
	// Offset is the 0-based index of the first line asked for.
	Offset int
	// Count is how many lines Text holds.
	Count int
	// TotalLines is how many lines the whole output has.
	TotalLines int
	// More reports whether lines follow the window.
	More bool
}

// Lines returns the lines [offset, offset+limit) of data; limit is capped at MaxWindowLines.
// An offset at or past the end gives an empty window, as does limit 0 (a way to learn
// TotalLines). A negative offset or limit is an ErrBadWindow. The window's Text is bounded by
// the line count only: a caller with a byte ceiling checks len(Text).
func Lines(data []byte, offset, limit int) (Window, error) {
	return linesAt(bytes.NewReader(data), int64(len(data)), offset, limit, math.MaxInt, scanBufferBytes)
}

// linesAt is Lines over the first size bytes of r, read in order through a buffer of bufSize
// bytes: it holds the window's lines and one buffer, never the whole of r. A window whose
// Text would be longer than maxText bytes is an ErrBadWindow.
func linesAt(r io.ReaderAt, size int64, offset, limit, maxText, bufSize int) (Window, error) {
	if offset < 0 {
		return Window{}, fmt.Errorf("%w: offset %d is negative", ErrBadWindow, offset)
	}
	if limit < 0 {
		return Window{}, fmt.Errorf("%w: limit %d is negative", ErrBadWindow, limit)
	}
	limit = min(limit, MaxWindowLines)
	w := Window{Offset: offset}
	var raw []byte
	sc := newLineScanner(r, size, bufSize)
	for line := 0; ; line++ {
		start, _, b, ok := sc.next()
		if !ok {
			break
		}
		w.TotalLines++
		if line < offset || line-offset >= limit {
			continue
		}
		w.Count++
		if int64(len(raw))+sc.pos-start > int64(maxText) {
			return Window{}, fmt.Errorf("%w: lines %d to %d are more than %d bytes; ask for fewer lines", ErrBadWindow, offset, line, maxText)
		}
		if b == nil {
			if raw, sc.err = appendAt(raw, r, start, sc.pos-start); sc.err != nil {
				break
			}
			continue
		}
		raw = append(raw, b...)
		if sc.pos-start > int64(len(b)) {
			raw = append(raw, '\n')
		}
	}
	if sc.err != nil {
		return Window{}, sc.err
	}
	w.Text = text(raw)
	if len(w.Text) > maxText {
		return Window{}, fmt.Errorf("%w: lines %d to %d are more than %d bytes; ask for fewer lines", ErrBadWindow, offset, offset+w.Count-1, maxText)
	}
	w.More = offset+w.Count < w.TotalLines
	return w, nil
}

// A Match is one line that matched a search.
type Match struct {
	// Line is the line's 0-based index.
	Line int
	// Text is the line without its "\n", rendered as valid UTF-8; when Clipped, an excerpt of
	// it that holds the start of the first match.
	Text string
	// Clipped reports that the line was longer than the bytes left to return.
	Clipped bool
}

// Matches is the result of a search.
type Matches struct {
	// Matches are the matching lines in order, at most the bounds asked for.
	Matches []Match
	// TotalLines is how many lines the whole output has.
	TotalLines int
	// Truncated reports that a bound cut the result: a match was clipped, or at least one
	// matching line was left out.
	Truncated bool
}

// Search returns the lines of data that match pattern, a Go regular expression (RE2 syntax),
// with their line numbers: at most maxMatches lines (capped at MaxWindowLines) and at most
// maxBytes bytes of rendered Text in all. Lines are those of Lines, matched one at a time
// without their "\n": ^ and $ anchor at line ends and a match never spans lines.
//
// A matching line longer than the bytes still allowed is returned Clipped, as an excerpt that
// starts up to a quarter of those bytes before its first match (more when the line ends
// sooner), and the search stops there. Either bound at 0 returns no matches, only whether any
// exists (Truncated). A pattern that does not compile or is longer than MaxPatternBytes is an
// ErrBadPattern; a negative bound is an ErrBadWindow.
func Search(data []byte, pattern string, maxMatches, maxBytes int) (Matches, error) {
	return searchAt(bytes.NewReader(data), int64(len(data)), pattern, maxMatches, maxBytes, scanBufferBytes)
}

// searchAt is Search over the first size bytes of r, read in order through a buffer of
// bufSize bytes. A line that fits the buffer is matched in it; a longer one is matched as a
// stream (RE2 reads a rune at a time), and only what the result needs of it is read back:
// the whole line when it fits the bytes left, otherwise the excerpt's neighbourhood. So it
// holds at most one buffer, one line no longer than maxBytes and the result.
func searchAt(r io.ReaderAt, size int64, pattern string, maxMatches, maxBytes, bufSize int) (Matches, error) {
	if maxMatches < 0 || maxBytes < 0 {
		return Matches{}, fmt.Errorf("%w: negative search bound (%d matches, %d bytes)", ErrBadWindow, maxMatches, maxBytes)
	}
	if len(pattern) > MaxPatternBytes {
		return Matches{}, fmt.Errorf("%w: pattern is %d bytes, more than %d", ErrBadPattern, len(pattern), MaxPatternBytes)
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return Matches{}, fmt.Errorf("%w: %w", ErrBadPattern, err)
	}
	maxMatches = min(maxMatches, MaxWindowLines)
	var res Matches
	left, done := maxBytes, false
	sc := newLineScanner(r, size, bufSize)
	for line := 0; ; line++ {
		start, n, l, ok := sc.next()
		if !ok {
			break
		}
		res.TotalLines++
		if done {
			continue // counting the lines left
		}
		at := -1
		if l != nil {
			if !re.Match(l) {
				continue
			}
		} else {
			er := &errReader{r: io.NewSectionReader(r, start, n)}
			loc := re.FindReaderIndex(bufio.NewReaderSize(er, bufSize))
			if er.err != nil {
				return Matches{}, er.err
			}
			if loc == nil {
				continue
			}
			at = loc[0]
		}
		if len(res.Matches) == maxMatches || left == 0 {
			res.Truncated, done = true, true
			continue
		}
		if l == nil && n <= int64(left) {
			if l, err = appendAt(nil, r, start, n); err != nil {
				return Matches{}, err
			}
		}
		if l != nil {
			if width, over := renderedLen(l, left); !over {
				res.Matches = append(res.Matches, Match{Line: line, Text: text(l)})
				left -= width
				continue
			}
			at = re.FindIndex(l)[0]
			res.Matches = append(res.Matches, Match{Line: line, Text: excerpt(l, at, left), Clipped: true})
			res.Truncated, done = true, true
			continue
		}
		// A line longer than the bytes left: read back only the neighbourhood excerpt can
		// reach (it renders at most left bytes, and a byte renders to at least one), with a
		// rune's margin each side so it never decodes a rune the cut split.
		lo := max(int64(at)-int64(left)-utf8.UTFMax, 0)
		hi := min(int64(at)+int64(left)+utf8.UTFMax, n)
		near, err := appendAt(nil, r, start+lo, hi-lo)
		if err != nil {
			return Matches{}, err
		}
		res.Matches = append(res.Matches, Match{Line: line, Text: excerpt(near, at-int(lo), left), Clipped: true})
		res.Truncated, done = true, true
	}
	if sc.err != nil {
		return Matches{}, sc.err
	}
	return res, nil
}

// excerpt renders at most budget bytes of line around offset at (a rune boundary): from up to
// budget/4 bytes before at, onward as far as budget allows, then back further if the line ends
// first.
func excerpt(line []byte, at, budget int) string {
	lo, hi, used := at, at, 0
	for lo > 0 {
		size, width := lastRune(line[:lo])
		if used+width > budget/4 {
			break
		}
		lo -= size
		used += width
	}
	for hi < len(line) {
		size, width := nextRune(line[hi:])
		if used+width > budget {
			break
		}
		hi += size
		used += width
	}
	for hi == len(line) && lo > 0 {
		size, width := lastRune(line[:lo])
		if used+width > budget {
			break
		}
		lo -= size
		used += width
	}
	return text(line[lo:hi])
}

// scanBufferBytes is the buffer windows and searches read through: a line that fits is
// handled in place, a longer one as a stream.
const scanBufferBytes = 64 << 10

// lineScanner walks the lines of the first size bytes of an io.ReaderAt in order, holding one
// buffer, however long the lines.
type lineScanner struct {
	br  *bufio.Reader
	pos int64 // offset of the first byte not yet read
	err error // the first read error; next reports the end after it
}

func newLineScanner(r io.ReaderAt, size int64, bufSize int) *lineScanner {
	return &lineScanner{br: bufio.NewReaderSize(io.NewSectionReader(r, 0, size), bufSize)}
}

// next returns the next line: its offset, its length without its "\n", and, when the whole
// line fitted the buffer, its bytes without the "\n" (valid until the next call; nil for a
// longer line). ok is false after the last line or a read error (in err).
func (s *lineScanner) next() (start, n int64, b []byte, ok bool) {
	start = s.pos
	for {
		chunk, err := s.br.ReadSlice('\n')
		first := s.pos == start
		s.pos += int64(len(chunk))
		switch {
		case err == nil:
			if first {
				return start, int64(len(chunk)) - 1, chunk[:len(chunk)-1], true
			}
			return start, s.pos - start - 1, nil, true
		case errors.Is(err, io.EOF):
			if s.pos == start {
				return start, 0, nil, false
			}
			if first {
				return start, int64(len(chunk)), chunk, true
			}
			return start, s.pos - start, nil, true
		case !errors.Is(err, bufio.ErrBufferFull):
			s.err = err
			return start, 0, nil, false
		}
	}
}

// appendAt appends the n bytes of r at off to dst.
func appendAt(dst []byte, r io.ReaderAt, off, n int64) ([]byte, error) {
	l := len(dst)
	dst = slices.Grow(dst, int(n))[:l+int(n)]
	if m, err := r.ReadAt(dst[l:], off); m < int(n) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // the blob is shorter than its size says
		}
		return dst[:l], err
	}
	return dst, nil
}

// errReader keeps the first error of r: regexp reads a stream to its first error and takes
// that for the end of the input, which must not pass for a line that did not match.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && e.err == nil {
		e.err = err
	}
	return n, err
}
