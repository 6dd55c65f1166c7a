package nearest

import "strings"

// maxDistance is how far a misspelling may be from the name it was meant to be: two edits
// (a letter left out and another swapped, say).
const maxDistance = 2

// maxNameBytes bounds the names compared: the distance costs the product of two lengths,
// and an upstream's argument names are another party's.
const maxNameBytes = 200

// Name returns the first of known closest to s, ignoring case, when it is close enough to
// be a typo (at most maxDistance edits); ok is false when none is. Names longer than
// maxNameBytes are never compared.
func Name(s string, known []string) (best string, ok bool) {
	if len(s) > maxNameBytes {
		return "", false
	}
	bestD := maxDistance + 1
	ls := strings.ToLower(s)
	for _, k := range known {
		if len(k) > maxNameBytes {
			continue
		}
		if d := distance(ls, strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	return best, bestD <= maxDistance
}

// distance is the Levenshtein distance of a and b, in bytes.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
