package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// lockedBuffer is a stdout the session's goroutines write to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

const pipeHandshake = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"elicitation":{}},"clientInfo":{"name":"pipe","version":"0"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
`

// serveLines serves srv over input that ends after lines, and returns what it wrote once
// ServeStdio returned (bounded).
func serveLines(t *testing.T, srv *mcp.Server, lines string) map[float64]json.RawMessage {
	t.Helper()
	out := &lockedBuffer{}
	done := make(chan error, 1)
	go func() { done <- ServeStdio(context.Background(), srv, io.NopCloser(strings.NewReader(lines)), out) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeStdio: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("ServeStdio did not return after its input ended")
	}
	answers := map[float64]json.RawMessage{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m struct {
			ID     *float64        `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not JSON-RPC on stdout: %q", line)
		}
		if m.ID != nil && m.Method == "" {
			answers[*m.ID] = m.Result
		}
	}
	return answers
}

// Requests read before the input ends are answered, a slow one included, and the session then
// ends on its own.
func TestStdioAnswersRequestsReadBeforeTheEnd(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "0"}, nil)
	srv.AddTool(&mcp.Tool{Name: "slow", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-time.After(300 * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err() // go-sdk alone cancels it at the input's end
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		})
	answers := serveLines(t, srv, pipeHandshake+
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}
{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"slow","arguments":{}}}
`)
	for _, id := range []float64{1, 2, 3} {
		if answers[id] == nil {
			t.Errorf("request %v was not answered", id)
		}
	}
	if !strings.Contains(string(answers[3]), `"done"`) {
		t.Errorf("the slow call answered %s, want its result", answers[3])
	}
}

// A request that asks the host something after the input ended cannot be answered (the
// host's answer would come on that input): the session ends at once instead of waiting.
func TestStdioEndsWhenAnAnswerCannotCome(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "0"}, nil)
	asked := make(chan error, 1)
	srv.AddTool(&mcp.Tool{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			time.Sleep(100 * time.Millisecond) // the input has ended by now
			_, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Mode: "form", Message: "ok?", RequestedSchema: approvalSchema})
			asked <- err
			return nil, err
		})
	start := time.Now()
	serveLines(t, srv, pipeHandshake+
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask","arguments":{}}}
`)
	select {
	case err := <-asked:
		if err == nil {
			t.Error("an elicitation after the input ended got an answer")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call read before the input ended never ran")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the session took %v to end", d)
	}
}
