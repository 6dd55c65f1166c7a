package cassette

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/binding"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
)

// TestPlayerBlobs: a replay's blob store serves, under each recorded handle, the bytes the
// cassette kept of its result (whole, or the first ones of a cut result); a handle whose
// result was kept by reference alone is not there, and nothing can be put.
func TestPlayerBlobs(t *testing.T) {
	const whole, cut, ref = "h_00000000000000000000000000000001", "h_00000000000000000000000000000002", "h_00000000000000000000000000000003"
	c, _ := record(t, nil,
		binding.TapedCall{Seq: 1, Name: "m__a", Args: json.RawMessage(`{}`), Answer: toolcall.Answer{Handle: &toolcall.Handle{ID: whole, Size: 6}}, Kept: []byte("l1\nl2\n")},
		binding.TapedCall{Seq: 2, Name: "m__b", Args: json.RawMessage(`{}`), Answer: toolcall.Answer{Handle: &toolcall.Handle{ID: cut, Size: 9}}, Kept: []byte("l1\n"), Cut: true},
		binding.TapedCall{Seq: 3, Name: "m__c", Args: json.RawMessage(`{}`), Answer: toolcall.Answer{Handle: &toolcall.Handle{ID: ref, Size: 9}}, Cut: true})
	if !c.Calls[1].ResultRef.Cut || c.Calls[0].ResultRef.Cut {
		t.Fatalf("the lines do not say which result was cut: %+v", c.Calls)
	}
	s := NewPlayer(c).Blobs()
	ctx := context.Background()
	for h, want := range map[string]string{whole: "l1\nl2\n", cut: "l1\n"} {
		b, err := s.Open(ctx, "any tenant", outputs.Handle(h))
		if err != nil {
			t.Fatalf("Open(%s): %v", h, err)
		}
		got, _ := io.ReadAll(b)
		b.Close()
		if string(got) != want {
			t.Errorf("Open(%s) reads %q, want %q", h, got, want)
		}
		w, err := outputs.BlobLines(ctx, s, "t", outputs.Handle(h), 0, 10)
		if err != nil || w.Text != want {
			t.Errorf("BlobLines(%s) = %q, %v; want %q", h, w.Text, err, want)
		}
	}
	if _, err := s.Open(ctx, "t", ref); !errors.Is(err, outputs.ErrNoBlob) {
		t.Errorf("a result kept by reference alone: %v, want ErrNoBlob", err)
	}
	if _, _, err := s.Put(ctx, "t", "n", "text/plain", strings.NewReader("x"), 10); err == nil {
		t.Error("a replay's blob store took a Put")
	}
}

// TestRecorderKeepsABoundedTotal: each result under a handle is kept up to the recorder's kept
// bytes, and all of them together up to MaxKeptTotal; past it, a result is kept by its handle
// alone.
func TestRecorderKeepsABoundedTotal(t *testing.T) {
	const each = 24 << 20
	r := NewRecorder(nil, each)
	var kept []int64
	for i := range 4 {
		n := r.KeptBytes()
		kept = append(kept, n)
		r.Record(binding.TapedCall{Seq: i + 1, Name: "m__big", Args: json.RawMessage(`{}`),
			Answer: toolcall.Answer{Handle: &toolcall.Handle{ID: "h", Size: 1 << 30}}, Kept: make([]byte, n), Cut: true})
	}
	if want := []int64{each, each, MaxKeptTotal - 2*each, 0}; !slices.Equal(kept, want) {
		t.Errorf("kept bytes offered per call %v, want %v", kept, want)
	}
}
