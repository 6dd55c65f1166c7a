package outputs

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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
	handlePrefix = "h_"
	handleHex    = 32 // 128 random bits
	// maxHeaderBytes bounds a blob's metadata line; Put rejects longer names.
	maxHeaderBytes = 4 << 10
	maxLabelBytes  = 1 << 10
	blobSuffix     = ".blob"
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

// A BlobStore keeps outputs on disk under a directory, one file per blob in a directory per
// tenant (named by a hash of the tenant, so a tenant name never becomes a path). A blob file is
// a one-line JSON header followed by the content; it appears whole (written to a temporary
// file, synced, renamed) and is removed whole, so a reader never sees half a blob.
//
// Lookups go to <dir>/<tenant hash>/<handle>.blob only: another tenant's handle is a path that
// does not exist for this tenant, which is why it fails exactly as a never-issued handle does.
//
// A BlobStore is safe for concurrent use, by goroutines and by processes sharing the directory.
// Retention is by age: Sweep removes blobs older than a cutoff, and RunSweeper does so on a
// schedule. A blob being read while swept stays readable through the open Blob (POSIX).
type BlobStore struct {
	dir string
}

// OpenBlobStore opens (creating if need be) the blob store in dir.
func OpenBlobStore(dir string) (*BlobStore, error) {
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o700); err != nil {
		return nil, fmt.Errorf("outputs: blob store: %w", err)
	}
	return &BlobStore{dir: dir}, nil
}

func tenantDir(tenant string) string {
	sum := sha256.Sum256([]byte(tenant))
	return "t_" + hex.EncodeToString(sum[:16])
}

func (s *BlobStore) path(tenant string, h Handle) string {
	return filepath.Join(s.dir, tenantDir(tenant), string(h)+blobSuffix)
}

// Put stores the content of r, at most maxBytes of it (maxBytes must be positive), for tenant
// and returns its new handle and size. Content beyond maxBytes is an ErrBlobTooLarge and nothing
// is kept. name and contentType are labels, at most 1 KiB each.
func (s *BlobStore) Put(ctx context.Context, tenant, name, contentType string, r io.Reader, maxBytes int64) (Handle, int64, error) {
	if maxBytes <= 0 {
		return "", 0, fmt.Errorf("outputs: Put: maxBytes %d is not positive", maxBytes)
	}
	if len(name) > maxLabelBytes || len(contentType) > maxLabelBytes {
		return "", 0, errors.New("outputs: Put: name or content type longer than 1 KiB")
	}
	h := NewHandle()
	info := BlobInfo{Handle: h, Name: name, ContentType: contentType, Created: time.Now().UTC()}
	tmp, err := os.CreateTemp(filepath.Join(s.dir, "tmp"), "put-*")
	if err != nil {
		return "", 0, fmt.Errorf("outputs: Put: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	// The header is written with a placeholder size first and rewritten in place once the
	// size is known: both encodings have the same width, so the content need not move.
	writeHeader := func(size int64) error {
		info.Size = size
		hdr, err := json.Marshal(headerOf(info))
		if err != nil {
			return err
		}
		_, err = tmp.WriteAt(append(hdr, '\n'), 0)
		return err
	}
	if err := writeHeader(sizePlaceholder); err != nil {
		return "", 0, fmt.Errorf("outputs: Put: %w", err)
	}
	hdrLen, _ := tmp.Seek(0, io.SeekEnd)
	n, err := io.Copy(tmp, io.LimitReader(ctxReader{ctx, r}, maxBytes+1))
	if err != nil {
		return "", 0, fmt.Errorf("outputs: Put: %w", err)
	}
	if n > maxBytes {
		return "", 0, fmt.Errorf("outputs: Put: %w (over %d bytes)", ErrBlobTooLarge, maxBytes)
	}
	if err := writeHeader(n); err != nil {
		return "", 0, fmt.Errorf("outputs: Put: %w", err)
	}
	if end, _ := tmp.Seek(0, io.SeekEnd); end != hdrLen+n {
		return "", 0, errors.New("outputs: Put: header width changed")
	}
	if err := tmp.Sync(); err != nil {
		return "", 0, fmt.Errorf("outputs: Put: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", 0, fmt.Errorf("outputs: Put: %w", err)
	}
	final := s.path(tenant, h)
	if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
		return "", 0, fmt.Errorf("outputs: Put: %w", err)
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		return "", 0, fmt.Errorf("outputs: Put: %w", err)
	}
	committed = true
	return h, n, nil
}

// sizePlaceholder is the size written before the content; sizes are encoded zero-padded to a
// fixed 19 digits (headerOf), so rewriting the header with the real size keeps its width.
const sizePlaceholder = 0

// header is the on-disk form of BlobInfo; Size is a fixed-width decimal string.
type header struct {
	Name        string `json:"name"`
	ContentType string `json:"content_type"`
	Size        string `json:"size"`
	Created     string `json:"created"`
}

func headerOf(i BlobInfo) header {
	return header{Name: i.Name, ContentType: i.ContentType, Size: fmt.Sprintf("%019d", i.Size),
		Created: i.Created.Format(time.RFC3339Nano)}
}

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
	f *os.File
}

// Close releases the blob's file.
func (b *Blob) Close() error { return b.f.Close() }

// Open opens tenant's blob h. A handle that is malformed, unknown, swept or another tenant's
// gives ErrNoBlob.
func (s *BlobStore) Open(tenant string, h Handle) (*Blob, error) {
	if !h.Valid() {
		return nil, ErrNoBlob
	}
	f, err := os.Open(s.path(tenant, h))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNoBlob
	}
	if err != nil {
		return nil, fmt.Errorf("outputs: open blob: %w", err)
	}
	br := bufio.NewReaderSize(io.LimitReader(f, maxHeaderBytes), maxHeaderBytes)
	line, err := br.ReadSlice('\n')
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("outputs: blob %s: bad header: %w", h, err)
	}
	var hd header
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&hd); err != nil {
		f.Close()
		return nil, fmt.Errorf("outputs: blob %s: bad header: %w", h, err)
	}
	info := BlobInfo{Handle: h, Name: hd.Name, ContentType: hd.ContentType}
	if _, err := fmt.Sscanf(hd.Size, "%d", &info.Size); err != nil {
		f.Close()
		return nil, fmt.Errorf("outputs: blob %s: bad size: %w", h, err)
	}
	info.Created, _ = time.Parse(time.RFC3339Nano, hd.Created)
	return &Blob{Info: info, SectionReader: io.NewSectionReader(f, int64(len(line)), info.Size), f: f}, nil
}

// Stat returns the info of tenant's blob h, or ErrNoBlob.
func (s *BlobStore) Stat(tenant string, h Handle) (BlobInfo, error) {
	b, err := s.Open(tenant, h)
	if err != nil {
		return BlobInfo{}, err
	}
	defer b.Close()
	return b.Info, nil
}

// ReadAll returns the whole content of tenant's blob h, or ErrNoBlob. The blob's size was
// bounded when it was put; a caller with a tighter bound checks Stat first.
func (s *BlobStore) ReadAll(tenant string, h Handle) ([]byte, error) {
	b, err := s.Open(tenant, h)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	data := make([]byte, b.Info.Size)
	if _, err := io.ReadFull(b, data); err != nil {
		return nil, fmt.Errorf("outputs: read blob %s: %w", h, err)
	}
	return data, nil
}

// Lines is Lines over tenant's blob h: the line window [offset, offset+limit).
func (s *BlobStore) Lines(tenant string, h Handle, offset, limit int) (Window, error) {
	data, err := s.ReadAll(tenant, h)
	if err != nil {
		return Window{}, err
	}
	return Lines(data, offset, limit)
}

// Search is Search over tenant's blob h.
func (s *BlobStore) Search(tenant string, h Handle, pattern string, maxMatches, maxBytes int) (Matches, error) {
	data, err := s.ReadAll(tenant, h)
	if err != nil {
		return Matches{}, err
	}
	return Search(data, pattern, maxMatches, maxBytes)
}

// Delete removes tenant's blob h; ErrNoBlob when there is none.
func (s *BlobStore) Delete(tenant string, h Handle) error {
	if !h.Valid() {
		return ErrNoBlob
	}
	err := os.Remove(s.path(tenant, h))
	if errors.Is(err, fs.ErrNotExist) {
		return ErrNoBlob
	}
	return err
}

// Sweep removes every blob, of every tenant, last written before cutoff, and leftovers of
// interrupted Puts older than cutoff. It returns how many blobs it removed and their bytes on
// disk. It stops early, with ctx's error, when ctx ends.
func (s *BlobStore) Sweep(ctx context.Context, cutoff time.Time) (removed int, freed int64, err error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return 0, 0, fmt.Errorf("outputs: sweep: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || !(strings.HasPrefix(e.Name(), "t_") || e.Name() == "tmp") {
			continue
		}
		dir := filepath.Join(s.dir, e.Name())
		files, err := os.ReadDir(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, f := range files {
			if err := ctx.Err(); err != nil {
				return removed, freed, err
			}
			fi, err := f.Info()
			if err != nil || !fi.Mode().IsRegular() || !fi.ModTime().Before(cutoff) {
				continue // gone meanwhile, not ours, or young
			}
			if err := os.Remove(filepath.Join(dir, f.Name())); err != nil {
				if !errors.Is(err, fs.ErrNotExist) {
					errs = append(errs, err)
				}
				continue
			}
			if e.Name() != "tmp" {
				removed++
				freed += fi.Size()
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return removed, freed, fmt.Errorf("outputs: sweep: %w", err)
	}
	return removed, freed, nil
}

// RunSweeper sweeps blobs older than retention every interval until ctx ends; the caller owns
// the goroutine it runs on. onError (may be nil) hears each failed sweep.
func (s *BlobStore) RunSweeper(ctx context.Context, interval, retention time.Duration, onError func(error)) {
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
