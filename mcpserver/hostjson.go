package mcpserver

import (
	"math"
	"strconv"
	"strings"
)

// jsRewrite rewrites compact JSON as Go's encoder writes it (HTML escaping off) into what
// JavaScript's JSON.stringify writes of the same parsed value: each number as JavaScript
// writes it, and the escapes Go adds where JavaScript writes the character itself (U+2028,
// U+2029, and U+FFFD for invalid UTF-8). Everything else is already alike.
func jsRewrite(in []byte) string {
	var b strings.Builder
	b.Grow(len(in))
	for i := 0; i < len(in); {
		switch c := in[i]; {
		case c == '"':
			j := i + 1
			b.WriteByte('"')
			for j < len(in) && in[j] != '"' {
				if in[j] != '\\' || j+1 >= len(in) {
					b.WriteByte(in[j])
					j++
					continue
				}
				if in[j+1] == 'u' && j+6 <= len(in) {
					if r, err := strconv.ParseUint(string(in[j+2:j+6]), 16, 32); err == nil && (r == 0x2028 || r == 0x2029 || r == 0xfffd) {
						b.WriteString(string(rune(r)))
						j += 6
						continue
					}
				}
				b.Write(in[j : j+2])
				j += 2
			}
			b.WriteByte('"')
			i = j + 1
		case c == '-' || (c >= '0' && c <= '9'):
			j := i
			for j < len(in) && strings.IndexByte("+-.0123456789eE", in[j]) >= 0 {
				j++
			}
			f, err := strconv.ParseFloat(string(in[i:j]), 64)
			if err != nil && !math.IsInf(f, 0) {
				b.Write(in[i:j])
			} else {
				b.WriteString(jsNumber(f))
			}
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// jsNumber is f as JavaScript's Number.prototype.toString writes it (ECMA-262
// Number::toString): the shortest digits that read back as f, in decimal notation from 1e-7
// to 1e21 and in exponent notation beyond; infinities, which JSON cannot carry, are null.
func jsNumber(f float64) string {
	switch {
	case math.IsInf(f, 0) || math.IsNaN(f):
		return "null"
	case f == 0:
		return "0"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // d[.ddd]e±x
	sign := ""
	if s[0] == '-' {
		sign, s = "-", s[1:]
	}
	mant, exp, _ := strings.Cut(s, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	n, k := x+1, len(digits) // f = 0.digits × 10^n
	switch {
	case k <= n && n <= 21:
		return sign + digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		return sign + digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		return sign + "0." + strings.Repeat("0", -n) + digits
	}
	m := digits[:1]
	if k > 1 {
		m += "." + digits[1:]
	}
	es := "+"
	if n-1 < 0 {
		es = "-"
	}
	return sign + m + "e" + es + strconv.Itoa(max(n-1, 1-n))
}
