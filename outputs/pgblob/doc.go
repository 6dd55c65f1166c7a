// Package pgblob is the outputs.BlobStore on PostgreSQL: every replica of the server opens the
// same database, so a handle made on one is read through any other. It passes the contract
// suite in outputs/blobtest, as outputs.FileStore does.
//
// # Layout: chunked rows, not large objects
//
// A blob is a row of blob_objects (handle, tenant, labels, size, created_at) and its content
// rows of blob_chunks, 256 KiB each (DefaultChunkBytes; each blob records its own chunk size),
// compressed by TOAST with LZ4 where the server has it. Put streams the content with COPY
// inside one transaction, holding one chunk: the blob appears whole at commit, and a Put that
// fails, or whose process dies, leaves nothing behind (the server rolls it back), so Sweep has
// no half-written blobs to find. Open reads in a read-only REPEATABLE READ transaction, one
// chunk fetched at a time as the reader reaches it: one snapshot, so an open blob reads whole
// and as it was even when it is deleted meanwhile, and memory is one chunk whatever the size.
// Tenant scoping is a column in every lookup's WHERE clause, so another tenant's handle finds
// no row, as a handle never issued does. Delete and Sweep remove the blob's row; its chunks go
// with it (ON DELETE CASCADE). Sweep works in batches that take their rows FOR UPDATE SKIP
// LOCKED, so replicas sweeping at once divide the work and each blob is counted once.
//
// Large objects were measured and set aside: they need a transaction around every read and
// write, are not removed with their row (lo_unlink, or vacuumlo, for every delete), live in
// one catalog no row-level scoping covers, and were the slowest. BenchmarkLayout, writing
// then reading a 16 MiB program log on the 2-core test machine under load (MB/s of content,
// and bytes stored per content byte):
//
//	chunked rows, LZ4, 64 KiB          60-130 MB/s   0.16
//	chunked rows, LZ4, 256 KiB         80-105 MB/s   0.16   (the default)
//	chunked rows, LZ4, 1 MiB           65-145 MB/s   0.15
//	chunked rows, pglz, 256 KiB        19-22 MB/s    0.14
//	chunked rows, uncompressed 256 KiB 29-41 MB/s    1.04
//	large objects                      10.5-10.8 MB/s
//
// LZ4 wins on both counts: outputs are text, and compressing them writes a sixth of the bytes
// to the table and the WAL. The chunk size mattered less than the machine's noise; 256 KiB
// bounds what an open blob or a Put holds while keeping round trips few.
//
// # Imports and concurrency
//
// It imports outputs, internal/pgdb, pgx and the standard library. A Store is safe for
// concurrent use; an open Blob (one transaction, one pooled connection until Close) is read
// by one goroutine at a time, its ReadAt calls serialised by a mutex.
package pgblob
