package binding

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/budget/sqlite"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
)

// TestDirectKept: a direct call's result over the preview size is kept under a handle, with a
// preview no larger than that size, and recorded with its handle, what the host got and what
// was kept; a small one, or any without a blob store, comes back whole.
func TestDirectKept(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	bindings := []string{}
	turn := f.pool.Catalogue(ctx).Resolve([]string{"up"}, nil, nil, &bindings)
	dir := t.TempDir()
	led, err := sqlite.Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	blobs, err := outputs.OpenFileStore(dir + "/blobs")
	if err != nil {
		t.Fatal(err)
	}
	run := budget.RunRef{Tenant: "t", ID: "r"}
	keep := Keep{Blobs: blobs, Tenant: "t", PreviewBytes: 1000}
	long := strings.Repeat("line of text\n", 2000) // 26,000 bytes

	r := DirectKept(ctx, turn, budget.Direct(led, run), nil, discard(), "up__echo", mustJSON(map[string]string{"s": long}), keep)
	if r.Kind != "" || r.Handle == nil || len(r.Preview) > keep.PreviewBytes || !strings.HasPrefix(r.Preview, "echo line of text\n") {
		t.Fatalf("large result = kind %q handle %+v preview %d bytes", r.Kind, r.Handle, len(r.Preview))
	}
	if want := int64(len("echo ") + len(long)); r.Handle.Size != want || r.Handle.Lines != 2000 || r.ContentType != "text/plain" {
		t.Errorf("handle %+v (%s), want %d bytes in 2000 lines of text/plain", r.Handle, r.ContentType, want)
	}
	off, lim := 1999, 5
	p, fe := Read(ctx, blobs, "t", ReadArgs{Handle: r.Handle.ID, Offset: &off, Limit: &lim}, 1<<20)
	if fe != nil || p.Window.Text != "line of text\n" || p.Window.More {
		t.Errorf("the last window = %+v (%v)", p.Window, fe)
	}
	calls, err := led.Calls(ctx, run)
	if err != nil || len(calls) != 1 {
		t.Fatalf("ledger calls = %d (%v), want 1", len(calls), err)
	}
	c := calls[0]
	if c.Status != budget.Succeeded || c.Usage.PreservedBytes != r.Handle.Size || c.Usage.TransferBytes >= int64(keep.PreviewBytes)+200 ||
		!strings.Contains(string(c.Attachments), r.Handle.ID) {
		t.Errorf("recorded %+v, attachments %s", c.Usage, c.Attachments)
	}

	small := DirectKept(ctx, turn, nil, nil, discard(), "up__echo", json.RawMessage(`{"s":"x"}`), keep)
	if small.Handle != nil || string(small.Value) != `"echo x"` {
		t.Errorf("small result = %+v", small)
	}
	whole := DirectKept(ctx, turn, nil, nil, discard(), "up__echo", mustJSON(map[string]string{"s": long}), Keep{PreviewBytes: 1000})
	if whole.Handle != nil || len(whole.Value) < len(long) {
		t.Errorf("without a store: handle %+v, %d bytes", whole.Handle, len(whole.Value))
	}
}
