package outputs

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
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
	if offset < 0 {
		return Window{}, fmt.Errorf("%w: offset %d is negative", ErrBadWindow, offset)
	}
	if limit < 0 {
		return Window{}, fmt.Errorf("%w: limit %d is negative", ErrBadWindow, limit)
	}
	limit = min(limit, MaxWindowLines)
	w := Window{Offset: offset, TotalLines: lineCount(data)}
	if offset >= w.TotalLines {
		return w, nil
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

// lineCount returns how many lines data has: one per "\n", plus an unterminated last line.
func lineCount(data []byte) int {
	n := bytes.Count(data, []byte("\n"))
	if len(data) > 0 && data[len(data)-1] != '\n' {
		n++
	}
	return n
}

// lineEnd returns the index just past the line that starts at start: past its "\n", or
// len(data).
func lineEnd(data []byte, start int) int {
	if i := bytes.IndexByte(data[start:], '\n'); i >= 0 {
		return start + i + 1
	}
	return len(data)
}
