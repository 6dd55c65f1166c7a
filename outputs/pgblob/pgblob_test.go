package pgblob

import (
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/internal/pgdb/pgtest"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
	"github.com/mcp-sandbox/mcp-sandbox/outputs/blobtest"
)

func open(t *testing.T, dsn string, opts *Options) *Store {
	t.Helper()
	s, err := Open(t.Context(), dsn, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestStoreContract(t *testing.T) {
	dsns := map[outputs.BlobStore]string{}
	blobtest.RunBlobStoreContract(t,
		func(t *testing.T) outputs.BlobStore {
			dsn := pgtest.Schema(t)
			s := open(t, dsn, nil)
			dsns[s] = dsn
			return s
		},
		func(t *testing.T, s outputs.BlobStore) outputs.BlobStore { return open(t, dsns[s], nil) })
}
