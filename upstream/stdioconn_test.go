package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// TestStdioFrameBound: an answer over a stdio server's frame bound is read, dropped and
// refused with a message naming the bound and its size; the connection goes on, and the next
// call of the same server is answered.
func TestStdioFrameBound(t *testing.T) {
	f := newFixture(t, func(s *Server) { s.MaxFrameBytes = 2 << 20 })
	turn := f.turn(t, nil, nil, nil)
	tool, fe := turn.Lookup("docs__bytes")
	if fe != nil {
		t.Fatal(fe)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, spent := turn.Invoke(ctx, tool, json.RawMessage(fmt.Sprintf(`{"n":%d}`, 3<<20)))
	if a.Kind != failure.UpstreamError || !strings.Contains(a.Message, "over the 2097152 an answer from an upstream may be") ||
		spent.Size < 3<<20 || !spent.Called {
		t.Fatalf("an answer over the bound: %+v %+v", a, spent)
	}
	a, _ = turn.Invoke(ctx, tool, json.RawMessage(`{"n":5}`))
	if a.Kind != "" || !strings.Contains(string(a.Value), "xxxxx") {
		t.Fatalf("the next call: %+v", a)
	}
	if n := f.count(t, "bytes"); n != 2 {
		t.Errorf("the server ran bytes %d times, want 2 (one process, never restarted)", n)
	}
	// Just under the bound crosses whole.
	if a, _ := turn.Invoke(ctx, tool, json.RawMessage(fmt.Sprintf(`{"n":%d}`, 2<<20-4096))); a.Kind != "" {
		t.Fatalf("an answer under the bound: %+v", a)
	}
}

// TestIDScanner: the top-level id of a frame is found wherever it stands, never a nested one.
func TestIDScanner(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"jsonrpc":"2.0","id":7,"result":{"x":"y"}}`, "7"},
		{`{"result":{"id":99,"content":[{"id":"no"}]},"jsonrpc":"2.0","id":12}`, "12"},
		{`{"result":"a \"id\":5, b","id":"s,1"}`, `"s,1"`},
		{`{"result":["id",{"id":3}], "id" : 4 }`, "4"},
		{`{"result":{"x":1}}`, ""},
		{`{"id":"` + strings.Repeat("x", 200) + `","result":1}`, ""},
	} {
		var s idScanner
		for i := 0; i < len(tc.in); i += 3 { // in pieces
			s.feed([]byte(tc.in[i:min(i+3, len(tc.in))]))
		}
		if got := string(s.id()); got != tc.want {
			t.Errorf("%s: id %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestLargeFramesBounded: the bytes of large frames held at once never pass the whole, and
// a waiter goes when its connection closes.
func TestLargeFramesBounded(t *testing.T) {
	s := newByteSemaphore(10)
	if !s.acquire(6, nil) {
		t.Fatal("the first acquire failed")
	}
	done := make(chan struct{})
	got := make(chan bool, 1)
	go func() { got <- s.acquire(6, done) }()
	select {
	case <-got:
		t.Fatal("12 of 10 bytes were held at once")
	case <-time.After(50 * time.Millisecond):
	}
	s.release(6)
	if !<-got {
		t.Fatal("the waiter did not get its bytes once they were released")
	}
	closed := make(chan struct{})
	close(closed)
	if s.acquire(6, closed) {
		t.Fatal("an acquire over the free bytes on a closed connection succeeded")
	}
}

// TestStdioConnRefusesFrames: over a stdio connection, a frame over its bound and one nested
// past the decoder's depth each become an error answer to their own call, and the frames after
// them are read as ever; the grown buffer is not kept.
func TestStdioConnRefusesFrames(t *testing.T) {
	deep := strings.Repeat("[", 1200) + strings.Repeat("]", 1200)
	in := `{"jsonrpc":"2.0","result":{"content":"` + strings.Repeat("x", 5000) + `"},"id":1}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"result":{"structuredContent":` + deep + `}}` + "\n" +
		"\n" +
		`{"jsonrpc":"2.0","id":3,"result":{}}` + "\r\n"
	c := newStdioConn(strings.NewReader(in), io.Discard, func() {}, 4096)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, want := range []struct {
		id   int64
		code int64
	}{{1, codeFrameTooLarge}, {2, codeFrameTooDeep}, {3, 0}} {
		msg, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("frame %d: %v", want.id, err)
		}
		r, ok := msg.(*jsonrpc.Response)
		if !ok || r.ID.Raw() != want.id {
			t.Fatalf("frame %d: %#v", want.id, msg)
		}
		var code int64
		if we, ok := r.Error.(*jsonrpc.Error); ok {
			code = we.Code
		}
		if code != want.code {
			t.Errorf("frame %d: error %v, want code %d", want.id, r.Error, want.code)
		}
	}
	if _, err := c.Read(ctx); !errors.Is(err, io.EOF) {
		t.Errorf("after the last frame: %v, want EOF", err)
	}
}
