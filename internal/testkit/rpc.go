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

// RPC is a client over streamable HTTP that speaks JSON-RPC by hand, for what go-sdk's client
// cannot send (the task methods): of revision 2025-11-25 in a session (OpenRPC), or of
// 2026-07-28 without one (ModernRPC), which frames every request as that revision asks (its
// headers, and the revision, client and capabilities in _meta, declaring the tasks
// extension).
type RPC struct {
	t      *testing.T
	url    string
	token  string
	id     string
	modern bool
	next   atomic.Int64
}

// ModernRPC is a client of revision 2026-07-28 at url as token's tenant.
func ModernRPC(t *testing.T, url, token string) *RPC {
	return &RPC{t: t, url: url, token: token, modern: true}
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
	msg := map[string]any{"jsonrpc": "2.0", "id": s.next.Add(1), "method": method, "params": params}
	if s.modern {
		b, _ := json.Marshal(params)
		var p map[string]any
		_ = json.Unmarshal(b, &p)
		if p == nil {
			p = map[string]any{}
		}
		meta, _ := p["_meta"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
		}
		meta["io.modelcontextprotocol/protocolVersion"] = "2026-07-28"
		meta["io.modelcontextprotocol/clientInfo"] = map[string]any{"name": "rpc-test", "version": "1"}
		meta["io.modelcontextprotocol/clientCapabilities"] = map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}
		p["_meta"] = meta
		msg["params"] = p
	}
	body := s.Post(msg)
	var ans struct {
		Result json.RawMessage `json:"result"`
		Error  *RPCError       `json:"error"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		s.t.Fatalf("%s: answer %q: %v", method, body, err)
	}
	if ans.Error != nil {
		return ans.Error
	}
	if err := json.Unmarshal(ans.Result, out); err != nil {
		s.t.Fatalf("%s: result %s: %v", method, ans.Result, err)
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
	if s.modern {
		var m struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		_ = json.Unmarshal(b, &m)
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", m.Method)
		if m.Params.Name != "" {
			req.Header.Set("Mcp-Name", m.Params.Name)
		}
	}
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
