package upstream

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestHTTPBearer serves a go-sdk server over streamable HTTP on loopback and checks that the
// credential is resolved for every request, sent, and never logged.
func TestHTTPBearer(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "h", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echoes."},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			S string `json:"s"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.S}}}, nil, nil
		})
	var bad atomic.Int32
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok-s3cret" {
			bad.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer ts.Close()

	var resolved atomic.Int32
	logs := &syncBuffer{}
	p, err := NewPool(PoolOptions{
		Servers: []Server{{Name: "web", URL: ts.URL, Bearer: func(context.Context) (string, error) {
			resolved.Add(1)
			return "tok-s3cret", nil
		}}},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cat := p.Catalogue(context.Background())
	if len(cat.Problems()) > 0 {
		t.Fatalf("problems: %v\n%s", cat.Problems(), logs)
	}
	turn := cat.Resolve([]string{"web"}, nil, nil, nil)
	if got := wantOK(t, turn.Call(context.Background(), "web__echo", json.RawMessage(`{"s":"hi"}`))); got != `"hi"` {
		t.Errorf("echo = %s", got)
	}
	before := resolved.Load()
	wantOK(t, turn.Call(context.Background(), "web__echo", json.RawMessage(`{"s":"again"}`)))
	if resolved.Load() <= before || bad.Load() != 0 {
		t.Errorf("credential resolved %d→%d times, %d unauthorized requests", before, resolved.Load(), bad.Load())
	}
	if strings.Contains(logs.String(), "s3cret") {
		t.Errorf("credential logged:\n%s", logs)
	}
}

func TestFrameLimitAndBlocks(t *testing.T) {
	f := newFixture(t, func(s *Server) { s.MaxFrameBytes = 64 << 10 })
	turn := f.turn(t, nil, nil, nil)
	wantOK(t, call(t, turn, "docs__bytes", `{"n":1000}`))
	wantKind(t, call(t, turn, "docs__bytes", `{"n":200000}`), UpstreamError)
	wantOK(t, call(t, f.turn(t, nil, nil, nil), "docs__bytes", `{"n":1000}`))
	var blocks []map[string]any
	if err := json.Unmarshal([]byte(wantOK(t, call(t, turn, "docs__mixed", ""))), &blocks); err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 2 || blocks[0]["type"] != "text" || blocks[1]["type"] != "image" || blocks[1]["mimeType"] != "image/png" || blocks[1]["data"] != "aGVsbG8=" {
		t.Errorf("blocks = %v", blocks)
	}
}
