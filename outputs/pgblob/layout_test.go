package pgblob

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/mcp-sandbox/mcp-sandbox/internal/pgdb/pgtest"
)

// layoutBytes is the blob size the layouts are measured with.
const layoutBytes = 16 << 20

// sample is program output: lines of text that compress the way real logs do.
func sample() []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < layoutBytes; i++ {
		fmt.Fprintf(&b, "2026-01-02T03:04:05Z INFO request %d served in %d ms from shard %d\n", i, i%97, i%7)
	}
	return b.Bytes()[:layoutBytes]
}

// BenchmarkLayout measures the store's layout (chunked rows, LZ4-compressed by TOAST) at three
// chunk sizes, the same rows compressed with pglz and uncompressed, and large objects, each
// writing and then reading a 16 MiB program output whole. These are the figures behind the
// package doc's choice; run with `go test ./outputs/pgblob -run '^$' -bench Layout`.
func BenchmarkLayout(b *testing.B) {
	data := sample()
	for _, chunk := range []int{64 << 10, 256 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("rows-lz4-%dk", chunk>>10), func(b *testing.B) { benchRows(b, data, chunk, "") })
	}
	b.Run("rows-pglz-256k", func(b *testing.B) {
		benchRows(b, data, 256<<10, `ALTER TABLE blob_chunks ALTER COLUMN data SET COMPRESSION pglz`)
	})
	b.Run("rows-uncompressed-256k", func(b *testing.B) {
		benchRows(b, data, 256<<10, `ALTER TABLE blob_chunks ALTER COLUMN data SET STORAGE EXTERNAL`)
	})
	b.Run("large-object", func(b *testing.B) { benchLargeObject(b, data) })
}

func benchRows(b *testing.B, data []byte, chunk int, alter string) {
	dsn := pgtest.Schema(b)
	s, err := Open(b.Context(), dsn, &Options{ChunkBytes: chunk})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if alter != "" {
		if _, err := s.pool.Exec(b.Context(), alter); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		h, _, err := s.Put(b.Context(), "t", "x", "", bytes.NewReader(data), int64(len(data)))
		if err != nil {
			b.Fatal(err)
		}
		blob, err := s.Open(b.Context(), "t", h)
		if err != nil {
			b.Fatal(err)
		}
		if n, err := io.Copy(io.Discard, blob); err != nil || n != int64(len(data)) {
			b.Fatal(n, err)
		}
		blob.Close()
	}
	b.StopTimer()
	reportSize(b, s.pool.QueryRow(b.Context(), `SELECT pg_total_relation_size('blob_chunks')`), int64(b.N))
}

func benchLargeObject(b *testing.B, data []byte) {
	dsn := pgtest.Schema(b)
	conn, err := pgx.Connect(b.Context(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	ctx := b.Context()
	var oids []uint32
	defer func() {
		for _, oid := range oids {
			_, _ = conn.Exec(context.Background(), `SELECT lo_unlink($1)`, oid)
		}
	}()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		var oid uint32
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			los := tx.LargeObjects()
			var err error
			if oid, err = los.Create(ctx, 0); err != nil {
				return err
			}
			lo, err := los.Open(ctx, oid, pgx.LargeObjectModeWrite)
			if err != nil {
				return err
			}
			_, err = io.Copy(lo, bytes.NewReader(data))
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		oids = append(oids, oid)
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			los := tx.LargeObjects()
			lo, err := los.Open(ctx, oid, pgx.LargeObjectModeRead)
			if err != nil {
				return err
			}
			n, err := io.Copy(io.Discard, lo)
			if n != int64(len(data)) {
				return fmt.Errorf("read %d", n)
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	var total int64
	for _, oid := range oids {
		var n int64
		if err := conn.QueryRow(ctx, `SELECT coalesce(sum(length(data)), 0) FROM pg_largeobject WHERE loid = $1`, oid).Scan(&n); err != nil {
			return // pg_largeobject is readable by superusers only
		}
		total += n
	}
	b.ReportMetric(float64(total)/float64(len(oids))/float64(len(data)), "stored/byte")
}

func reportSize(b *testing.B, row pgx.Row, blobs int64) {
	var n int64
	if err := row.Scan(&n); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(n)/float64(blobs)/float64(layoutBytes), "stored/byte")
}
