package toolshape

// Clip cuts s to at most n bytes at a character boundary, marking a cut with "…": how a text
// an upstream sent is bounded wherever a model, a person or a log line reads it.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// IsLineBreak reports whether r ends a line: \n, \r, \v, \f, NEL, U+2028 and U+2029, so no
// text an upstream sent forges a line of what is rendered one line per item.
func IsLineBreak(r rune) bool {
	switch r {
	case '\n', '\r', '\v', '\f', '\u0085', '\u2028', '\u2029':
		return true
	}
	return false
}
