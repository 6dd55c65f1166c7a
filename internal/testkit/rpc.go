package testkit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// RPC is a client of revision 2025-11-25 over streamable HTTP that speaks JSON-RPC by hand,
// for what go-sdk's client cannot send (the task methods).
type RPC struct {
	t     *testing.T
	url   string
	token string
	id    string
	next  atomic.Int64
}

// RPCError is a JSON-RPC error answer.
type RPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// OpenRPC initializes a session of revision 2025-11-25 at url as token's tenant ("": none)
// and returns it with the server's initialize result.
func OpenRPC(t *testing.T, url, token string) (*RPC, map[string]any) {
	t.Helper()
	s := &RPC{t: t, url: url, token: token}
	var init map[string]any
	if e := s.Call("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "tasks-test", "version": "1"}}, &init); e != nil {
		t.Fatalf("initialize: %+v", e)
	}
	s.Post(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	return s, init
}

// Call sends one request and decodes its result into out, or returns its error.
func (s *RPC) Call(method string, params any, out any) *RPCError {
	s.t.Helper()
	body := s.Post(map[string]any{"jsonrpc": "2.0", "id": s.next.Add(1), "method": method, "params": params})
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  *RPCError       `json:"error"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		s.t.Fatalf("%s: answer %q: %v", method, body, err)
	}
	if msg.Error != nil {
		return msg.Error
	}
	if err := json.Unmarshal(msg.Result, out); err != nil {
		s.t.Fatalf("%s: result %s: %v", method, msg.Result, err)
	}
	return nil
}

// Post sends msg and returns the JSON-RPC answer (from JSON, or the SSE event carrying it).
func (s *RPC) Post(msg any) []byte {
	s.t.Helper()
	b, _ := json.Marshal(msg)
	req, _ := http.NewRequest(http.MethodPost, s.url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		s.id = id
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		body, _ := io.ReadAll(resp.Body)
		return body
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(d, `"id"`) {
			return []byte(d)
		}
	}
	return nil
}
