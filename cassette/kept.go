package cassette

import (
	"bytes"
	"context"
	"errors"
	"io"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/outputs"
)

// Blobs is the blob store of a replay: the results the cassette recorded under handles, each
// as the bytes the cassette kept of it, under its recorded handle, for any tenant. It is
// read-only; a handle whose result the cassette kept nothing of is outputs.ErrNoBlob.
func (p *Player) Blobs() outputs.BlobStore {
	k := keptStore{}
	for _, c := range p.c.Calls {
		if r := c.ResultRef; r != nil && (r.Kept != "" || !r.Cut) {
			k[outputs.Handle(r.Handle.ID)] = []byte(r.Kept)
		}
	}
	return k
}

// keptStore serves the kept bytes of recorded handles. Immutable, so safe for concurrent use.
type keptStore map[outputs.Handle][]byte

var errReadOnly = errors.New("cassette: a replay's blob store keeps nothing new")

func (k keptStore) Put(context.Context, string, string, string, io.Reader, int64) (outputs.Handle, int64, error) {
	return "", 0, errReadOnly
}

func (k keptStore) Open(_ context.Context, _ string, h outputs.Handle) (*outputs.Blob, error) {
	b, ok := k[h]
	if !ok {
		return nil, outputs.ErrNoBlob
	}
	return outputs.NewBlob(k.info(h, b), bytes.NewReader(b), io.NopCloser(nil)), nil
}

func (k keptStore) Stat(_ context.Context, _ string, h outputs.Handle) (outputs.BlobInfo, error) {
	b, ok := k[h]
	if !ok {
		return outputs.BlobInfo{}, outputs.ErrNoBlob
	}
	return k.info(h, b), nil
}

func (keptStore) info(h outputs.Handle, b []byte) outputs.BlobInfo {
	return outputs.BlobInfo{Handle: h, Name: "recorded result", ContentType: "application/json", Size: int64(len(b))}
}

func (keptStore) Delete(context.Context, string, outputs.Handle) error { return errReadOnly }

func (keptStore) Sweep(context.Context, time.Time) (int, int64, error) { return 0, 0, nil }

func (k keptStore) TenantBytes(context.Context, string) (int64, error) {
	return k.TotalBytes(context.Background())
}

func (k keptStore) TotalBytes(context.Context) (int64, error) {
	var n int64
	for _, b := range k {
		n += int64(len(b))
	}
	return n, nil
}
