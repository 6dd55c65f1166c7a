package binding

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/budget/sqlite"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

// A program reads only its own handles, in windows no wider than the transfer allowance, and
// each window is charged to the transfer meter.
func TestExecutionReadHandle(t *testing.T) {
	ctx := context.Background()
	x := newExecution(t, budget.Limits{MaxResultBytes: 4096})
	m, blobs := x.meter, x.blobs
	content := bytes.Repeat([]byte("0123456789abcdef\n"), 1000)
	own, _, err := blobs.Put(ctx, "t", "r", "text/plain", bytes.NewReader(content), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	other, _, _ := blobs.Put(ctx, "t", "r", "text/plain", bytes.NewReader(content), 1<<20)
	x.handles[own] = true

	r := x.ReadHandle(ctx, string(own), 2, 3, "")
	var w Window
	if r.Kind != "" || json.Unmarshal(r.Value, &w) != nil || w.Count != 3 || w.Text != strings.Repeat("0123456789abcdef\n", 3) || !w.More {
		t.Fatalf("window: %+v %s", r, r.Value)
	}
	if r := x.ReadHandle(ctx, string(other), 0, 1, ""); r.Kind != failure.Unavailable {
		t.Errorf("another execution's handle: %+v", r)
	}
	if r := x.ReadHandle(ctx, string(own), 0, 1000, ""); r.Kind != failure.BindingResultTooLarge {
		t.Errorf("a window over the ceiling: %+v", r)
	}
	exec, _, _ := m.Usage(ctx)
	if want := int64(len(mustJSON(w))); exec.TransferBytes != want {
		t.Errorf("transfer = %d, want %d (the one window served)", exec.TransferBytes, want)
	}
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// newExecution is an execution of tenant "t" metered with limits in a fresh ledger, with a
// fresh blob store, both closed when t ends.
func newExecution(t *testing.T, limits budget.Limits) *Execution {
	t.Helper()
	x, _ := newExecutionLedger(t, limits)
	return x
}

// newExecutionLedger is newExecution that also returns the ledger, for a later execution of
// the same Run ("r").
func newExecutionLedger(t *testing.T, limits budget.Limits) (*Execution, budget.Ledger) {
	t.Helper()
	ctx := context.Background()
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
	m, err := budget.Start(ctx, led, budget.RunRef{Tenant: "t", ID: "r"}, "", "", limits)
	if err != nil {
		t.Fatal(err)
	}
	return New(&Options{Meter: m, Blobs: blobs, Tenant: "t", Logger: discard()}), led
}

// TestJSONHandleReadInWindows keeps a 20 MiB structured result under a handle and reads it in
// line windows narrower than the transfer ceiling: the JSON is stored indented, one line per
// member, not as one line no window can be narrower than.
func TestJSONHandleReadInWindows(t *testing.T) {
	ctx := context.Background()
	x := newExecution(t, budget.Limits{MaxResultBytes: 64 << 10})
	var b bytes.Buffer
	b.WriteString(`{"rows":[`)
	for i := 0; b.Len() < 20<<20; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"text":"%s"}`, i, strings.Repeat("y", 100))
	}
	b.WriteString(`]}`)
	value := json.RawMessage(b.Bytes())
	tool := &upstream.Tool{Name: "docs__big", Server: "docs", Upstream: "big"}
	tk, fe := admit(ctx, x.meter, "", tool.Name, json.RawMessage(`{}`))
	if fe != nil {
		t.Fatal(fe)
	}
	// Steps 9 and 10 of the walk, given the upstream's answer.
	r, o := x.deliver(ctx, tk, tool, toolcall.Answer{Value: value}, upstream.Spent{Size: len(value), Called: true})
	x.finish(ctx, tk, o)
	if r.Kind != "" || r.Handle == nil {
		t.Fatalf("no handle: %+v", r)
	}
	if r.Handle.Lines < 1000 {
		t.Fatalf("handle has %d lines; the JSON was kept on too few lines to page", r.Handle.Lines)
	}
	for _, off := range []int{0, 1000, r.Handle.Lines - 10} {
		rr := x.ReadHandle(ctx, string(r.Handle.ID), off, 50, "")
		var w Window
		if rr.Kind != "" || json.Unmarshal(rr.Value, &w) != nil || w.Count == 0 {
			t.Fatalf("window at %d: %+v", off, rr.Kind)
		}
	}
	x.Wait()
}
