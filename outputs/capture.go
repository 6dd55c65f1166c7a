package outputs

import "sync"

// minKeep is the first allocation for kept bytes, so a short stream costs little and a long one
// does not grow its buffer a byte at a time.
const minKeep = 4 << 10

// A Capture is an io.Writer for one output stream of a hostile child. It keeps the first
// maxBytes of the stream and, in a fixed ring, the last previewBytes, and counts every byte, so
// a gigabyte costs O(maxBytes+previewBytes) memory. Write never fails: an io.Copy from the
// child's pipe drains it to EOF, and a child is never blocked or signalled by a full buffer.
//
// A Capture is safe for concurrent use. It is meant for one writer (writes from several
// goroutines would interleave at Write granularity) with any number of readers, such as a
// progress reporter asking for Size while the stream is still being drained.
type Capture struct {
	maxBytes     int64
	previewBytes int64

	mu sync.Mutex // guards the fields below
	// kept holds the first min(size, maxBytes) bytes. Bytes below len(kept) are never
	// written again, which is what lets Bytes hand them out without a copy.
	kept []byte
	// ring holds the last min(size, previewBytes) bytes once size exceeds maxBytes (before
	// that, they are the end of kept). It is allocated then, at its full size, and never again.
	ring    []byte
	ringPos int // where the next byte goes; once the ring is full, also where the oldest is
	ringLen int // how much of ring holds stream bytes
	size    int64
}

// NewCapture returns a Capture that keeps the first maxBytes of a stream and can preview it in
// previewBytes. A negative bound is taken as zero.
func NewCapture(maxBytes, previewBytes int64) *Capture {
	return &Capture{maxBytes: max(maxBytes, 0), previewBytes: max(previewBytes, 0)}
}

// Write records p. It always returns len(p), nil.
func (c *Capture) Write(p []byte) (int, error) {
	n := len(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.size < c.maxBytes {
		k := min(int64(len(p)), c.maxBytes-c.size)
		c.keep(p[:k])
		c.size += k
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	if c.ring == nil && c.previewBytes > 0 {
		// First byte past maxBytes: kept is the whole stream so far, and its end starts the
		// tail.
		c.ring = make([]byte, c.previewBytes)
		c.ringWrite(c.kept)
	}
	if c.ring != nil {
		c.ringWrite(p)
	}
	c.size += int64(len(p))
	return n, nil
}

// keep appends b to kept, growing it by doubling but never beyond maxBytes.
func (c *Capture) keep(b []byte) {
	if need := len(c.kept) + len(b); need > cap(c.kept) {
		grown := min(int64(max(2*cap(c.kept), need, minKeep)), c.maxBytes)
		kept := make([]byte, len(c.kept), grown)
		copy(kept, c.kept)
		c.kept = kept
	}
	c.kept = append(c.kept, b...)
}

func (c *Capture) ringWrite(p []byte) {
	if len(p) >= len(c.ring) {
		copy(c.ring, p[len(p)-len(c.ring):])
		c.ringPos, c.ringLen = 0, len(c.ring)
		return
	}
	k := copy(c.ring[c.ringPos:], p)
	copy(c.ring, p[k:])
	c.ringPos = (c.ringPos + len(p)) % len(c.ring)
	c.ringLen = min(c.ringLen+len(p), len(c.ring))
}

// Bytes returns the kept bytes: the first min(Size, maxBytes) bytes of the stream. The slice
// shares the Capture's memory; later writes never change it, and the caller must not either.
func (c *Capture) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.kept[:len(c.kept):len(c.kept)]
}

// Size returns how many bytes were written, kept or not.
func (c *Capture) Size() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size
}

// Truncated reports whether more was written than kept.
func (c *Capture) Truncated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size > int64(len(c.kept))
}

// Tail returns a copy of the last min(Size, previewBytes) bytes of the stream, kept or not.
func (c *Capture) Tail() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.tail()...)
}

// Preview returns the head-and-tail preview of everything written, in at most previewBytes
// bytes: the head from the kept bytes, the tail from the ring (see the package function
// Preview). When maxBytes ≥ previewBytes it equals Preview of the whole stream.
func (c *Capture) Preview() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Preview(c.kept, c.tail(), c.size, int(c.previewBytes))
}

// tail is Tail without the copy; it may alias kept or ring. c.mu must be held.
func (c *Capture) tail() []byte {
	if c.ring == nil {
		// Either nothing went past maxBytes, so kept is the stream, or previewBytes is 0.
		return c.kept[int64(len(c.kept))-min(int64(len(c.kept)), c.previewBytes):]
	}
	if c.ringLen < len(c.ring) {
		return c.ring[:c.ringLen]
	}
	t := make([]byte, 0, len(c.ring))
	t = append(t, c.ring[c.ringPos:]...)
	return append(t, c.ring[:c.ringPos]...)
}
