package pgblob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcp-sandbox/mcp-sandbox/internal/pgdb"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
)

// DefaultChunkBytes is the size of the rows a blob is cut into (see the package doc for why).
const DefaultChunkBytes = 256 << 10

// sweepBatch is how many blobs one statement of Sweep removes.
const sweepBatch = 200

// Options tunes Open; nil means defaults.
type Options struct {
	// ChunkBytes is the size of the rows new blobs are cut into; default DefaultChunkBytes.
	// Each blob records its own, so it may change between versions or replicas.
	ChunkBytes int
}

// A Store is the outputs.BlobStore on PostgreSQL, shared by every replica that opens the same
// database. It is safe for concurrent use; Close may be called more than once.
type Store struct {
	pool  *pgxpool.Pool
	chunk int
}

var _ outputs.BlobStore = (*Store)(nil)

// schema are the blob store's migrations (internal/pgdb): append, never edit.
var schema = []string{
	`CREATE TABLE blob_objects (
		handle       text        PRIMARY KEY,
		tenant       text        NOT NULL,
		name         text        NOT NULL,
		content_type text        NOT NULL,
		size         bigint      NOT NULL DEFAULT 0,
		chunk_bytes  integer     NOT NULL,
		created_at   timestamptz NOT NULL DEFAULT now()
	);
	CREATE INDEX blob_objects_tenant ON blob_objects (tenant) INCLUDE (size);
	CREATE INDEX blob_objects_created ON blob_objects (created_at);
	CREATE TABLE blob_chunks (
		handle text    NOT NULL REFERENCES blob_objects (handle) ON DELETE CASCADE,
		seq    integer NOT NULL,
		data   bytea   NOT NULL,
		PRIMARY KEY (handle, seq)
	);
	-- LZ4 (PostgreSQL 14 and later, when built with it; Debian's is) where the server has it,
	-- else the default pglz: see the package doc for the figures.
	DO $$ BEGIN
		EXECUTE 'ALTER TABLE blob_chunks ALTER COLUMN data SET COMPRESSION lz4';
	EXCEPTION WHEN OTHERS THEN NULL;
	END $$;`,
}

// Open connects to the database dsn names and applies the blob store's migrations. No error
// it returns contains the DSN or its password.
func Open(ctx context.Context, dsn string, opts *Options) (*Store, error) {
	chunk := DefaultChunkBytes
	if opts != nil && opts.ChunkBytes > 0 {
		chunk = opts.ChunkBytes
	}
	pool, err := pgdb.Open(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("pgblob: %w", err)
	}
	if _, err := pgdb.Migrate(ctx, pool, "blobs", schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgblob: schema: %w", err)
	}
	return &Store{pool: pool, chunk: chunk}, nil
}

// Close closes the pool, waiting for open Blobs to be closed.
func (s *Store) Close() { s.pool.Close() }

// Put writes the blob's row and streams its chunks with COPY, in one transaction: the blob
// appears whole at commit, and a Put that fails or whose process dies leaves nothing.
func (s *Store) Put(ctx context.Context, tenant, name, contentType string, r io.Reader, maxBytes int64) (outputs.Handle, int64, error) {
	if err := outputs.CheckPut(name, contentType, maxBytes); err != nil {
		return "", 0, err
	}
	h := outputs.NewHandle()
	src := &chunkSource{handle: string(h), r: outputs.CtxReader(ctx, r), max: maxBytes, buf: make([]byte, s.chunk)}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO blob_objects (handle, tenant, name, content_type, chunk_bytes) VALUES ($1, $2, $3, $4, $5)`,
			h, tenant, name, contentType, s.chunk); err != nil {
			return err
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"blob_chunks"}, []string{"handle", "seq", "data"}, src); err != nil {
			if src.err != nil {
				return src.err // the reader's failure, or the size bound, rather than COPY's report of it
			}
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE blob_objects SET size = $2 WHERE handle = $1`, h, src.n)
		return err
	})
	if errors.Is(err, outputs.ErrBlobTooLarge) {
		return "", 0, fmt.Errorf("pgblob: Put: %w (over %d bytes)", err, maxBytes)
	}
	if err != nil {
		return "", 0, fmt.Errorf("pgblob: Put: %w", err)
	}
	return h, src.n, nil
}

// chunkSource feeds COPY one chunk of the reader at a time, reusing one buffer (pgx encodes a
// row before it asks for the next).
type chunkSource struct {
	handle string
	r      io.Reader
	max    int64
	buf    []byte
	seq    int32
	cur    []byte
	n      int64
	err    error
}

func (c *chunkSource) Next() bool {
	if c.err != nil {
		return false
	}
	n, err := io.ReadFull(c.r, c.buf)
	switch {
	case n == 0 && (err == nil || errors.Is(err, io.EOF)):
		return false
	case err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF):
		c.err = err
		return false
	}
	if c.n += int64(n); c.n > c.max {
		c.err = outputs.ErrBlobTooLarge
		return false
	}
	c.cur = c.buf[:n]
	c.seq++
	return true
}

func (c *chunkSource) Values() ([]any, error) { return []any{c.handle, c.seq - 1, c.cur}, nil }
func (c *chunkSource) Err() error             { return c.err }

const infoColumns = `name, content_type, size, chunk_bytes, created_at`

func scanInfo(row pgx.Row, h outputs.Handle) (outputs.BlobInfo, int, error) {
	info := outputs.BlobInfo{Handle: h}
	var chunk int
	err := row.Scan(&info.Name, &info.ContentType, &info.Size, &chunk, &info.Created)
	if errors.Is(err, pgx.ErrNoRows) {
		return outputs.BlobInfo{}, 0, outputs.ErrNoBlob
	}
	if err != nil {
		return outputs.BlobInfo{}, 0, fmt.Errorf("pgblob: %w", err)
	}
	info.Created = info.Created.UTC()
	return info, chunk, nil
}

// Open reads the blob in a read-only REPEATABLE READ transaction held until Close: one
// snapshot, so the blob reads whole and as it was even if it is deleted or swept meanwhile.
// The transaction holds one pooled connection.
func (s *Store) Open(ctx context.Context, tenant string, h outputs.Handle) (*outputs.Blob, error) {
	if !h.Valid() {
		return nil, outputs.ErrNoBlob
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("pgblob: %w", err)
	}
	info, chunk, err := scanInfo(tx.QueryRow(ctx, `SELECT `+infoColumns+` FROM blob_objects WHERE handle = $1 AND tenant = $2`, h, tenant), h)
	if err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, err
	}
	r := &chunkReader{ctx: ctx, tx: tx, handle: string(h), size: info.Size, chunk: int64(chunk), seq: -1}
	return outputs.NewBlob(info, r, r), nil
}

// chunkReader is the io.ReaderAt of an open blob: the chunk holding an offset, fetched when
// first asked for and kept until another is.
type chunkReader struct {
	ctx    context.Context
	handle string
	size   int64
	chunk  int64

	mu   sync.Mutex // guards the fields below: ReaderAt allows parallel calls, a tx does not
	tx   pgx.Tx
	seq  int64 // the chunk in data; -1 for none
	data []byte
}

func (c *chunkReader) ReadAt(p []byte, off int64) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tx == nil {
		return 0, errors.New("pgblob: read of a closed blob")
	}
	n := 0
	for n < len(p) && off < c.size {
		if seq := off / c.chunk; seq != c.seq {
			if err := c.fetch(seq); err != nil {
				return n, err
			}
		}
		within := off % c.chunk
		if within >= int64(len(c.data)) {
			return n, fmt.Errorf("pgblob: blob %s: chunk %d is short", c.handle, c.seq)
		}
		k := copy(p[n:], c.data[within:])
		n += k
		off += int64(k)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// fetch loads chunk seq into c.data, reusing its buffer. Called with mu held.
func (c *chunkReader) fetch(seq int64) error {
	rows, err := c.tx.Query(c.ctx, `SELECT data FROM blob_chunks WHERE handle = $1 AND seq = $2`, c.handle, seq)
	if err != nil {
		return fmt.Errorf("pgblob: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return fmt.Errorf("pgblob: %w", err)
		}
		return fmt.Errorf("pgblob: blob %s: chunk %d is missing", c.handle, seq)
	}
	c.data = append(c.data[:0], rows.RawValues()[0]...)
	c.seq = seq
	rows.Close()
	return rows.Err()
}

func (c *chunkReader) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tx == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), 5*time.Second)
	defer cancel()
	err := c.tx.Rollback(ctx) // read only: nothing to keep
	c.tx, c.data = nil, nil
	return err
}

func (s *Store) Stat(ctx context.Context, tenant string, h outputs.Handle) (outputs.BlobInfo, error) {
	if !h.Valid() {
		return outputs.BlobInfo{}, outputs.ErrNoBlob
	}
	info, _, err := scanInfo(s.pool.QueryRow(ctx, `SELECT `+infoColumns+` FROM blob_objects WHERE handle = $1 AND tenant = $2`, h, tenant), h)
	return info, err
}

func (s *Store) Delete(ctx context.Context, tenant string, h outputs.Handle) error {
	if !h.Valid() {
		return outputs.ErrNoBlob
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM blob_objects WHERE handle = $1 AND tenant = $2`, h, tenant)
	if err != nil {
		return fmt.Errorf("pgblob: delete: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return outputs.ErrNoBlob
	}
	return nil
}

// Sweep deletes old blobs a batch at a time. Each batch locks the rows it takes with SKIP
// LOCKED, so replicas sweeping at once share the work instead of queueing on each other, and
// each blob is deleted, and counted, by exactly one of them; its chunks go with it (ON DELETE
// CASCADE). freed counts content bytes.
func (s *Store) Sweep(ctx context.Context, cutoff time.Time) (removed int, freed int64, err error) {
	for {
		var n int
		var bytes int64
		err := s.pool.QueryRow(ctx, `WITH gone AS (
				DELETE FROM blob_objects WHERE handle IN (
					SELECT handle FROM blob_objects WHERE created_at < $1 ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)
				RETURNING size)
			SELECT count(*), coalesce(sum(size), 0) FROM gone`, cutoff, sweepBatch).Scan(&n, &bytes)
		if err != nil {
			return removed, freed, fmt.Errorf("pgblob: sweep: %w", err)
		}
		removed += n
		freed += bytes
		if n < sweepBatch {
			return removed, freed, nil
		}
	}
}

// TenantBytes is the sum of the tenant's blob sizes, from the index on tenant (which carries
// each size, so the answer needs no table read).
func (s *Store) TenantBytes(ctx context.Context, tenant string) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(size), 0) FROM blob_objects WHERE tenant = $1`, tenant).Scan(&n); err != nil {
		return 0, fmt.Errorf("pgblob: tenant bytes: %w", err)
	}
	return n, nil
}

// TotalBytes is the sum of every blob's size (an index-only scan of the index on tenant).
func (s *Store) TotalBytes(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(size), 0) FROM blob_objects`).Scan(&n); err != nil {
		return 0, fmt.Errorf("pgblob: total bytes: %w", err)
	}
	return n, nil
}
