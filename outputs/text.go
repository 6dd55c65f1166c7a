package outputs

import (
	"strings"
	"unicode/utf8"
)

// replacementWidth is what one invalid input byte costs in rendered text: U+FFFD in UTF-8.
const replacementWidth = 3

// nextRune reports the first rune of b (non-empty) as its width in b and its width once
// rendered. An invalid byte is a rune of width 1 rendered as U+FFFD, as utf8.DecodeRune and
// regexp see it.
func nextRune(b []byte) (size, width int) {
	r, size := utf8.DecodeRune(b)
	if r == utf8.RuneError && size == 1 {
		return 1, replacementWidth
	}
	return size, size
}

// lastRune is nextRune from the end of b (non-empty). Stepping back from a rune boundary it
// finds the same boundaries as decoding forward: every byte that can start a rune starts one.
func lastRune(b []byte) (size, width int) {
	r, size := utf8.DecodeLastRune(b)
	if r == utf8.RuneError && size == 1 {
		return 1, replacementWidth
	}
	return size, size
}

// renderedLen returns how many bytes text(b) would take, stopping early, with over set, once
// that exceeds limit.
func renderedLen(b []byte, limit int) (n int, over bool) {
	for i := 0; i < len(b); {
		size, width := nextRune(b[i:])
		n += width
		if n > limit {
			return n, true
		}
		i += size
	}
	return n, false
}

// text renders b as valid UTF-8, each invalid byte becoming one U+FFFD. (strings.ToValidUTF8
// would fold a run of invalid bytes into one, which would break the byte accounting.)
func text(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + len(b)/2)
	writeText(&sb, b)
	return sb.String()
}

func writeText(sb *strings.Builder, b []byte) {
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			sb.WriteRune(utf8.RuneError)
		} else {
			sb.Write(b[:size])
		}
		b = b[size:]
	}
}
