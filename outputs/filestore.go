package outputs

import (
	"bufio"
	"bytes"
	"context"
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

const (
	// maxHeaderBytes bounds a blob file's metadata line; CheckPut rejects longer labels.
	maxHeaderBytes = 4 << 10
	blobSuffix     = ".blob"
)

// A FileStore is the BlobStore on local disk: one file per blob under a directory, in a
// directory per tenant (named by a hash of the tenant, so a tenant name never becomes a path).
// A blob file is a one-line JSON header followed by the content; it appears whole (written to
// a temporary file, synced, renamed) and is removed whole, so a reader never sees half a blob.
//
// Lookups go to <dir>/<tenant hash>/<handle>.blob only: another tenant's handle is a path that
// does not exist for this tenant, which is why it fails exactly as a never-issued handle does.
// Processes sharing the directory share the store. Retention is by age: Sweep removes blob
// files last written before the cutoff. A blob being read while swept stays readable through
// the open Blob (POSIX).
type FileStore struct {
	dir string
}

// OpenFileStore opens (creating if need be) the blob store in dir.
func OpenFileStore(dir string) (*FileStore, error) {
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o700); err != nil {
		return nil, fmt.Errorf("outputs: blob store: %w", err)
	}
	// Directories 0700 and blobs 0600 (CreateTemp): a directory an older version left open to
	// others is tightened.
	for _, d := range []string{dir, filepath.Join(dir, "tmp")} {
		if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(d, st.Mode().Perm()&^0o077); err != nil {
				return nil, fmt.Errorf("outputs: blob store: %w", err)
			}
		}
	}
	return &FileStore{dir: dir}, nil
}

func tenantDir(tenant string) string {
	sum := sha256.Sum256([]byte(tenant))
	return "t_" + hex.EncodeToString(sum[:16])
}

func (s *FileStore) path(tenant string, h Handle) string {
	return filepath.Join(s.dir, tenantDir(tenant), string(h)+blobSuffix)
}

// Put writes the content to a temporary file and renames it into place once whole.
func (s *FileStore) Put(ctx context.Context, tenant, name, contentType string, r io.Reader, maxBytes int64) (Handle, int64, error) {
	if err := CheckPut(name, contentType, maxBytes); err != nil {
		return "", 0, err
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

// Open opens the blob's file; an open file outlives its removal.
func (s *FileStore) Open(_ context.Context, tenant string, h Handle) (*Blob, error) {
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
	return NewBlob(info, io.NewSectionReader(f, int64(len(line)), info.Size), f), nil
}

func (s *FileStore) Stat(ctx context.Context, tenant string, h Handle) (BlobInfo, error) {
	b, err := s.Open(ctx, tenant, h)
	if err != nil {
		return BlobInfo{}, err
	}
	defer b.Close()
	return b.Info, nil
}

// TenantBytes adds up the sizes of tenant's blob files, headers included: what the tenant
// occupies on disk, a few hundred bytes a blob above its content.
func (s *FileStore) TenantBytes(ctx context.Context, tenant string) (int64, error) {
	return dirBytes(ctx, filepath.Join(s.dir, tenantDir(tenant)))
}

// TotalBytes adds up TenantBytes over every tenant's directory.
func (s *FileStore) TotalBytes(ctx context.Context) (int64, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return 0, fmt.Errorf("outputs: total bytes: %w", err)
	}
	var n int64
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "t_") {
			continue
		}
		b, err := dirBytes(ctx, filepath.Join(s.dir, e.Name()))
		if err != nil {
			return 0, err
		}
		n += b
	}
	return n, nil
}

// dirBytes adds up the sizes of the blob files in one tenant's directory.
func dirBytes(ctx context.Context, dir string) (int64, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("outputs: tenant bytes: %w", err)
	}
	var n int64
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && strings.HasSuffix(e.Name(), blobSuffix) {
			n += fi.Size()
		}
	}
	return n, nil
}

func (s *FileStore) Delete(_ context.Context, tenant string, h Handle) error {
	if !h.Valid() {
		return ErrNoBlob
	}
	err := os.Remove(s.path(tenant, h))
	if errors.Is(err, fs.ErrNotExist) {
		return ErrNoBlob
	}
	return err
}

// Sweep removes blob files last written before cutoff, and leftovers of interrupted Puts
// older than cutoff; freed counts bytes on disk, headers included.
func (s *FileStore) Sweep(ctx context.Context, cutoff time.Time) (removed int, freed int64, err error) {
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
