package outputs_test

import (
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/outputs"
	"github.com/mcp-sandbox/mcp-sandbox/outputs/blobtest"
)

func TestFileStoreContract(t *testing.T) {
	dirs := map[outputs.BlobStore]string{}
	open := func(t *testing.T, dir string) outputs.BlobStore {
		s, err := outputs.OpenFileStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		dirs[s] = dir
		return s
	}
	blobtest.RunBlobStoreContract(t,
		func(t *testing.T) outputs.BlobStore { return open(t, t.TempDir()) },
		func(t *testing.T, s outputs.BlobStore) outputs.BlobStore { return open(t, dirs[s]) })
}
