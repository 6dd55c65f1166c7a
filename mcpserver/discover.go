package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
)

// declineDiscovery answers `server/discover` — the stateless protocol's opening probe — with
// JSON-RPC "method not found", so a client that speaks both falls back to `initialize` and
// the session protocol we serve.
//
// Why: the go-sdk answers the probe itself, listing the versions it supports, and at least
// one client in the wild (mark3labs/mcp-go v1.2.1) then carries on with the version it
// probed, which every later request is refused for. "Method not found" is the answer that
// client, and the protocol's own fallback rule, treat as "use initialize". Requests of
// every other method pass through untouched. r.Body must already be bounded (limitBody).
func declineDiscovery(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		if r.Header.Get("Mcp-Method") != "server/discover" {
			// The header is the 2026 protocol's; look at the body too, for a client without it.
			body, err := io.ReadAll(r.Body) // bounded: limitBody wrapped it
			if err != nil {
				var tooLarge *http.MaxBytesError
				if errors.As(err, &tooLarge) {
					http.Error(w, "the request body is too large", http.StatusRequestEntityTooLarge)
					return
				}
				http.Error(w, "reading the request body failed", http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			var head struct {
				Method string `json:"method"`
			}
			if json.Unmarshal(body, &head) != nil || head.Method != "server/discover" {
				next.ServeHTTP(w, r)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &req)
		if len(req.ID) == 0 {
			req.ID = json.RawMessage("null")
		}
		w.Header().Set("Content-Type", "application/json")
		resp, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID,
			"error": map[string]any{"code": -32601, "message": "Method not found: this server speaks the session protocol; send initialize"}})
		_, _ = w.Write(resp)
	})
}

// limitBody bounds the request body at limit bytes before anything reads it, answering 413
// at once when Content-Length already says it is larger.
func limitBody(limit int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			http.Error(w, "the request body is too large", http.StatusRequestEntityTooLarge)
			return
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		}
		next.ServeHTTP(w, r)
	})
}
