package outputs

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// The elision marker is "…[elided N bytes]…" for every N, 1 included: one fixed shape is easier
// for a model, and a test, to recognize than correct English.
const (
	markerOpen  = "…[elided "
	markerClose = " bytes]…"
	// tinyMarker stands alone when previewBytes cannot hold the full marker.
	tinyMarker = "…"
)

func elisionMarker(n int64) string {
	return markerOpen + strconv.FormatInt(n, 10) + markerClose
}

// Preview renders the head-and-tail preview of a stream of total bytes, of which head is a
// prefix and tail a suffix (they may overlap). The result is valid UTF-8 and at most
// previewBytes bytes long, and depends only on its arguments.
//
// When head and tail together hold the whole stream and its rendering fits in previewBytes, the
// preview is the stream itself. Otherwise it is
//
//	head part + "…[elided N bytes]…" + tail part
//
// Room for the marker is reserved as if N were total (so its length is known before N is); of
// what is left, the head part takes the longest run of whole runes from the start of the stream
// whose rendering fits in two thirds, and the tail part the longest run of whole runes from the
// end that fits in the rest, never reaching back into the head part. Text is rendered with each
// invalid byte as U+FFFD, so a part's rendered length can exceed the original bytes behind it.
// N is exact, in original bytes:
//
//	N = total − (bytes of the stream behind the head part) − (bytes behind the tail part)
//
// so every byte of the stream is either shown, once, or counted in N, and N ≥ 1: the marker
// appears only when something was left out.
//
// A part never ends at the edge of head or tail where a rune might continue into bytes that were
// not passed in: those bytes count in N instead. Given at least previewBytes bytes of head and of
// tail (or the whole stream), Preview returns what it would return given the whole stream; that
// is how a Capture's preview equals the preview of everything the child wrote.
//
// When previewBytes cannot hold even the marker, the preview is "…" if it fits, else "". A
// preview of an empty stream, or with previewBytes ≤ 0, is "". A total smaller than len(head)
// or len(tail) is taken to be the larger length.
func Preview(head, tail []byte, total int64, previewBytes int) string {
	total = max(total, int64(len(head)), int64(len(tail)))
	if previewBytes <= 0 || total == 0 {
		return ""
	}
	// Rendering never shrinks a stream, so a stream longer than previewBytes cannot fit.
	if total <= int64(previewBytes) && int64(len(head))+int64(len(tail)) >= total {
		whole := head
		if int64(len(whole)) < total {
			rest := tail[int64(len(tail))-(total-int64(len(head))):]
			whole = append(head[:len(head):len(head)], rest...)
		}
		if _, over := renderedLen(whole, previewBytes); !over {
			return text(whole)
		}
	}

	reserve := len(elisionMarker(total))
	if reserve > previewBytes {
		if len(tinyMarker) <= previewBytes {
			return tinyMarker
		}
		return ""
	}
	room := previewBytes - reserve

	// Head part: head[:hi], rendered in used bytes.
	headCut := int64(len(head)) < total // head ends where the stream does not
	hi, used := 0, 0
	for budget := room * 2 / 3; hi < len(head); {
		if headCut && !utf8.FullRune(head[hi:]) {
			break // the rune may continue past head
		}
		size, width := nextRune(head[hi:])
		if used+width > budget {
			break
		}
		hi += size
		used += width
	}

	// Tail part: tail[ti:], never below lo, the first byte of tail not already in the head part.
	tailAt := total - int64(len(tail)) // stream offset of tail[0]
	lo := 0
	if int64(hi) > tailAt {
		lo = int(int64(hi) - tailAt)
	}
	ti := len(tail)
	for budget, tused := room-used, 0; ti > lo; {
		seg := tail[lo:ti]
		if lo == 0 && tailAt > 0 && maybeCut(seg) {
			break // the rune may begin before tail
		}
		size, width := lastRune(seg)
		if tused+width > budget {
			break
		}
		ti -= size
		tused += width
	}

	n := total - int64(hi) - int64(len(tail)-ti)
	var sb strings.Builder
	sb.Grow(previewBytes)
	writeText(&sb, head[:hi])
	sb.WriteString(elisionMarker(n))
	writeText(&sb, tail[ti:])
	return sb.String()
}

// maybeCut reports whether the last rune of seg, which starts the known part of a stream, could
// decode differently with the bytes before seg: only when seg is too short to hold the start of
// the rune and holds nothing but continuation bytes.
func maybeCut(seg []byte) bool {
	if len(seg) >= utf8.UTFMax {
		return false
	}
	for _, b := range seg {
		if utf8.RuneStart(b) {
			return false
		}
	}
	return true
}
