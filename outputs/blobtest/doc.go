// Package blobtest is the contract every outputs.BlobStore must pass, run by the tests of each
// implementation (outputs.FileStore in outputs, pgblob.Store in outputs/pgblob): streamed
// writes and windowed reads that never hold a whole blob in memory, tenant scoping (another
// tenant's handle answers exactly as one never issued), bounded sizes, sharing between
// processes, and retention that is safe with many replicas sweeping at once.
//
// It imports outputs, go-cmp and the standard library, and is for tests only.
package blobtest
