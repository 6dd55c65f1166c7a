package outputs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// ErrNoBlob is the error for a handle the caller may not read: malformed, never issued, swept,
// or issued to another tenant. All of these are one error with one text, so a handle reveals
// nothing to a tenant it does not belong to. Its text is safe to show a model.
var ErrNoBlob = errors.New("no such output handle")

// ErrBlobTooLarge is wrapped by Put's error when the content exceeds its maxBytes; nothing is
// stored then (a shortened blob would be a silent truncation).
var ErrBlobTooLarge = errors.New("output too large to preserve")

const (
	handlePrefix  = "h_"
	handleHex     = 32      // 128 random bits
	maxLabelBytes = 1 << 10 // a name or content type

	// MaxWindowBytes bounds the text of one line window read from a blob (BlobLines): a wider
	// one is an ErrBadWindow that asks for fewer lines, so a window is never the whole of a
	// large blob in memory.
	MaxWindowBytes = 16 << 20
)

// A Handle names one preserved output: "h_" and 128 random bits in lowercase hex. It is bound
// to the tenant it was issued to.
type Handle string

// NewHandle returns a fresh, unguessable handle.
func NewHandle() Handle {
	var b [handleHex / 2]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return Handle(handlePrefix + hex.EncodeToString(b[:]))
}

// Valid reports whether h has the shape of a handle.
func (h Handle) Valid() bool {
	s, ok := strings.CutPrefix(string(h), handlePrefix)
	if !ok || len(s) != handleHex {
		return false
	}
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// BlobInfo describes a preserved output.
type BlobInfo struct {
	Handle      Handle    `json:"handle"`
	Name        string    `json:"name"`
	ContentType string    `json:"content_type"`
	Size        int64     `json:"size"`
	Created     time.Time `json:"created"`
}

// A BlobStore keeps preserved outputs under handles, per tenant: FileStore on local disk, and
// pgblob.Store on PostgreSQL for replicas on several machines. Every implementation passes
// the contract suite in outputs/blobtest and is safe for concurrent use, by goroutines and by
// processes (replicas) sharing the store.
//
// A handle belongs to the tenant it was issued to: asked for by another tenant it is
// ErrNoBlob, exactly as a handle never issued. A blob appears whole or not at all, and is
// removed whole. Put reads its content as a stream, and BlobLines and BlobSearch read a blob
// in order through a bounded buffer: no operation holds a whole blob in memory.
type BlobStore interface {
	// Put stores the content of r, at most maxBytes of it (maxBytes must be positive), for
	// tenant and returns its new handle and size. Content beyond maxBytes is an
	// ErrBlobTooLarge and nothing is kept. name and contentType are labels, at most 1 KiB
	// each (CheckPut).
	Put(ctx context.Context, tenant, name, contentType string, r io.Reader, maxBytes int64) (Handle, int64, error)
	// Open opens tenant's blob h for reading; the Blob reads with ctx. It stays readable, as
	// it was, until closed, even if it is deleted or swept meanwhile. ErrNoBlob for a handle
	// that is malformed, unknown, swept or another tenant's.
	Open(ctx context.Context, tenant string, h Handle) (*Blob, error)
	// Stat returns the info of tenant's blob h, or ErrNoBlob.
	Stat(ctx context.Context, tenant string, h Handle) (BlobInfo, error)
	// Delete removes tenant's blob h; ErrNoBlob when there is none.
	Delete(ctx context.Context, tenant string, h Handle) error
	// Sweep removes every blob, of every tenant, created before cutoff, and whatever
	// interrupted Puts left behind, and returns how many blobs it removed and the bytes it
	// freed. Sweeps running at once, in any number of processes, remove and count each blob
	// once. It stops early, with ctx's error, when ctx ends.
	Sweep(ctx context.Context, cutoff time.Time) (removed int, freed int64, err error)
	// TenantBytes returns the bytes tenant's blobs occupy: what a per-tenant quota on stored
	// bytes checks.
	TenantBytes(ctx context.Context, tenant string) (int64, error)
	// TotalBytes returns the bytes every tenant's blobs occupy together, counted as
	// TenantBytes counts them: what the server's quota on stored bytes checks.
	TotalBytes(ctx context.Context) (int64, error)
}

// CheckPut checks the arguments of a Put, as every BlobStore does before it reads anything.
func CheckPut(name, contentType string, maxBytes int64) error {
	if maxBytes <= 0 {
		return fmt.Errorf("outputs: Put: maxBytes %d is not positive", maxBytes)
	}
	if len(name) > maxLabelBytes || len(contentType) > maxLabelBytes {
		return errors.New("outputs: Put: name or content type longer than 1 KiB")
	}
	return nil
}

// CtxReader reads r until ctx ends: a Put reading a stream stops when its caller gives up.
func CtxReader(ctx context.Context, r io.Reader) io.Reader { return ctxReader{ctx, r} }

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// A Blob is an open preserved output: its info and a reader over its content. Close it.
type Blob struct {
	Info BlobInfo
	*io.SectionReader
	closer    io.Closer
	closeOnce sync.Once
	closeErr  error
}

// NewBlob returns a Blob of info reading info.Size bytes from r; Close closes c.
func NewBlob(info BlobInfo, r io.ReaderAt, c io.Closer) *Blob {
	return &Blob{Info: info, SectionReader: io.NewSectionReader(r, 0, info.Size), closer: c}
}

// Close releases the blob; it may be called more than once.
func (b *Blob) Close() error {
	b.closeOnce.Do(func() { b.closeErr = b.closer.Close() })
	return b.closeErr
}

// BlobLines is Lines over tenant's blob h: the line window [offset, offset+limit). A window
// whose text would be over MaxWindowBytes is an ErrBadWindow.
func BlobLines(ctx context.Context, s BlobStore, tenant string, h Handle, offset, limit int) (Window, error) {
	b, err := s.Open(ctx, tenant, h)
	if err != nil {
		return Window{}, err
	}
	defer b.Close()
	w, err := linesAt(b, b.Info.Size, offset, limit, MaxWindowBytes, scanBufferBytes)
	if err != nil && !errors.Is(err, ErrBadWindow) {
		return Window{}, fmt.Errorf("outputs: read blob %s: %w", h, err)
	}
	return w, err
}

// BlobSearch is Search over tenant's blob h.
func BlobSearch(ctx context.Context, s BlobStore, tenant string, h Handle, pattern string, maxMatches, maxBytes int) (Matches, error) {
	b, err := s.Open(ctx, tenant, h)
	if err != nil {
		return Matches{}, err
	}
	defer b.Close()
	m, err := searchAt(b, b.Info.Size, pattern, maxMatches, maxBytes, scanBufferBytes)
	if err != nil && !errors.Is(err, ErrBadWindow) && !errors.Is(err, ErrBadPattern) {
		return Matches{}, fmt.Errorf("outputs: read blob %s: %w", h, err)
	}
	return m, err
}

// RunSweeper sweeps s of blobs older than retention every interval until ctx ends; the
// caller owns the goroutine it runs on. onError (may be nil) hears each failed sweep.
func RunSweeper(ctx context.Context, s BlobStore, interval, retention time.Duration, onError func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, _, err := s.Sweep(ctx, time.Now().Add(-retention)); err != nil && onError != nil && ctx.Err() == nil {
			onError(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
