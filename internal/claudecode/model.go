package claudecode

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// ToolUse is a tool_use block the scripted model sends: a call of Name (as Claude Code names
// MCP tools: mcp__<server>__<tool>) with Input.
type ToolUse struct {
	Name  string
	Input map[string]any
}

// Turn is one scripted answer: tool_use blocks (stop_reason tool_use), or, with none, Text as
// the final answer (end_turn).
type Turn struct {
	ToolUses []ToolUse
	Text     string
}

// Request is one request Claude Code sent the scripted API, as received.
type Request struct {
	Method, Path string
	Body         json.RawMessage
	At           time.Time
}

// Model is a scripted Messages API: each /v1/messages request that offers tools is answered
// with the next of Turns (the last one again once they run out), or with what Script makes of
// the request when it is set (n counts the scripted turns from 0); a request without tools (a
// title or a summary Claude Code asks for on the side) with a short text.
type Model struct {
	Turns  []Turn
	Script func(req MessagesRequest, n int) Turn

	mu       sync.Mutex
	next     int
	requests []Request
	answered []time.Time // when each scripted turn was sent
}

// Requests returns every request received so far.
func (m *Model) Requests() []Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Request(nil), m.requests...)
}

// AnsweredAt returns when each scripted turn had been sent whole.
func (m *Model) AnsweredAt() []time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]time.Time(nil), m.answered...)
}

// Messages returns the bodies of the /v1/messages requests that offered tools, decoded.
func (m *Model) Messages() []MessagesRequest {
	var out []MessagesRequest
	for _, r := range m.Requests() {
		var b MessagesRequest
		if r.Method == http.MethodPost && strings.HasPrefix(r.Path, "/v1/messages") && !strings.Contains(r.Path, "count_tokens") &&
			json.Unmarshal(r.Body, &b) == nil && len(b.Tools) > 0 {
			out = append(out, b)
		}
	}
	return out
}

// MessagesRequest is what the tests read of a /v1/messages request body.
type MessagesRequest struct {
	Model    string    `json:"model"`
	Tools    []ToolDef `json:"tools"`
	Messages []Message `json:"messages"`
	Stream   bool      `json:"stream"`
}

// ToolDef is a tool as Claude Code lists it to its model.
type ToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Message is one message of the conversation Claude Code sends.
type Message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// Block is one content block of a message.
type Block struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Text      string          `json:"text"`
}

// Blocks returns m's content blocks (a string content is one text block).
func (m Message) Blocks() []Block {
	var bs []Block
	if json.Unmarshal(m.Content, &bs) == nil {
		return bs
	}
	var s string
	_ = json.Unmarshal(m.Content, &s)
	return []Block{{Type: "text", Text: s}}
}

// ResultText is a tool_result block's content as the model reads it: its string, or its text
// blocks joined.
func (b Block) ResultText() string {
	var s string
	if json.Unmarshal(b.Content, &s) == nil {
		return s
	}
	var parts []Block
	_ = json.Unmarshal(b.Content, &parts)
	var out strings.Builder
	for _, p := range parts {
		out.WriteString(p.Text)
	}
	return out.String()
}

// ToolResults returns the tool_result blocks of the last request: what the model read of the
// calls it made last, by tool_use id.
func ToolResults(req MessagesRequest) map[string]Block {
	out := map[string]Block{}
	if len(req.Messages) == 0 {
		return out
	}
	for _, b := range req.Messages[len(req.Messages)-1].Blocks() {
		if b.Type == "tool_result" {
			out[b.ToolUseID] = b
		}
	}
	return out
}

// ServeHTTP answers as the Messages API does: POST /v1/messages streamed as server-sent events
// (or one JSON message when the request does not ask for a stream), POST
// /v1/messages/count_tokens with a count, anything else with an empty JSON object.
func (m *Model) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	m.mu.Lock()
	m.requests = append(m.requests, Request{Method: r.Method, Path: r.URL.Path, Body: body, At: time.Now()})
	m.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/count_tokens"):
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"input_tokens":%d}`, len(body)/4)
		return
	case r.Method != http.MethodPost || r.URL.Path != "/v1/messages":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, "{}")
		return
	}
	var req struct {
		Model  string            `json:"model"`
		Stream bool              `json:"stream"`
		Tools  []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"body is not JSON"}}`, http.StatusBadRequest)
		return
	}
	turn := Turn{Text: "ok"}
	scripted := len(req.Tools) > 0 && (len(m.Turns) > 0 || m.Script != nil)
	if scripted {
		m.mu.Lock()
		n := m.next
		m.next++
		m.mu.Unlock()
		if m.Script != nil {
			var full MessagesRequest
			_ = json.Unmarshal(body, &full)
			turn = m.Script(full, n)
		} else {
			turn = m.Turns[min(n, len(m.Turns)-1)]
		}
	}
	id := fmt.Sprintf("msg_%d", time.Now().UnixNano())
	var blocks []map[string]any
	stop := "end_turn"
	for i, u := range turn.ToolUses {
		blocks = append(blocks, map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%s_%d", id[4:], i), "name": u.Name, "input": u.Input})
		stop = "tool_use"
	}
	if len(blocks) == 0 {
		blocks = append(blocks, map[string]any{"type": "text", "text": turn.Text})
	}
	usage := map[string]any{"input_tokens": len(body) / 4, "output_tokens": 10}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "type": "message", "role": "assistant", "model": req.Model,
			"content": blocks, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
	} else {
		m.stream(w, id, req.Model, blocks, stop, usage)
	}
	if scripted {
		m.mu.Lock()
		m.answered = append(m.answered, time.Now())
		m.mu.Unlock()
	}
}

// stream writes one message as the Messages API streams it: message_start, each block's
// content_block_start, delta (text_delta, or input_json_delta with the tool's input) and
// content_block_stop, then message_delta with the stop reason and message_stop.
func (m *Model) stream(w http.ResponseWriter, id, model string, blocks []map[string]any, stop string, usage map[string]any) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	event := func(name string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	event("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": id, "type": "message",
		"role": "assistant", "model": model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": usage["input_tokens"], "output_tokens": 1}}})
	for i, b := range blocks {
		if b["type"] == "text" {
			event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": b["text"]}})
		} else {
			input, _ := json.Marshal(b["input"])
			event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
		}
		event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": usage["output_tokens"]}})
	event("message_stop", map[string]any{"type": "message_stop"})
}
