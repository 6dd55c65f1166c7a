package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// fakePeer is an A2A 0.3 agent scripted per test: it serves card at the well-known path and
// answers JSON-RPC at /rpc with answer, recording every request. The real peer, an agent built
// with @a2a-js/sdk, is driven by the conformance tests; this one plays the hostile and the
// rare answers a real agent does not give on demand.
type fakePeer struct {
	t      *testing.T
	srv    *httptest.Server
	card   func(base string) any // the card's JSON; nil: a card with skills
	skills []map[string]any
	answer func(method string, params json.RawMessage) (result any, rpcErr *rpcError)

	mu       sync.Mutex
	requests []fakeRequest
}

type fakeRequest struct {
	method, auth, version string // version: the A2A-Version header
	params                json.RawMessage
}

func newFakePeer(t *testing.T) *fakePeer {
	f := &fakePeer{t: t, skills: []map[string]any{
		{"id": "stock", "name": "Stock", "description": "Stock of a SKU.", "tags": []string{}},
		{"id": "echo", "name": "Echo", "description": "Echoes.", "tags": []string{}},
	}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakePeer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/.well-known/agent-card.json" {
		f.record(fakeRequest{method: "card", auth: r.Header.Get("Authorization"), version: r.Header.Get("A2A-Version")})
		var card any = map[string]any{
			"name": "fake", "description": "a fake", "version": "1", "protocolVersion": "0.3.0",
			"url": f.srv.URL + "/rpc", "preferredTransport": "JSONRPC", "capabilities": map[string]any{},
			"defaultInputModes": []string{"text/plain"}, "defaultOutputModes": []string{"text/plain"},
			"skills": f.skills,
		}
		if f.card != nil {
			card = f.card(f.srv.URL)
		}
		if b, ok := card.([]byte); ok {
			w.Header().Set("Content-Type", "application/json")
			w.Write(b)
			return
		}
		writeJSON(w, card)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/rpc" {
		http.NotFound(w, r)
		return
	}
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	f.record(fakeRequest{method: req.Method, auth: r.Header.Get("Authorization"), version: r.Header.Get("A2A-Version"), params: req.Params})
	if req.Method == "tasks/cancel" {
		writeJSON(w, map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": task("t1", "canceled", nil)})
		return
	}
	result, rerr := f.answer(req.Method, req.Params)
	switch v := result.(type) {
	case http.HandlerFunc: // a hostile transport
		v(w, r)
		return
	}
	resp := map[string]any{"jsonrpc": "2.0", "id": req.ID}
	if rerr != nil {
		resp["error"] = rerr
	} else {
		resp["result"] = result
	}
	writeJSON(w, resp)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (f *fakePeer) record(r fakeRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r)
}

// calls returns the requests of method received so far.
func (f *fakePeer) calls(method string) []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeRequest
	for _, r := range f.requests {
		if r.method == method {
			out = append(out, r)
		}
	}
	return out
}

// pool returns a Pool with the fake as A2A peer "peer", its logs in logs.
func (f *fakePeer) pool(t *testing.T, tweak func(*Server)) (*Pool, *testkit.Log) {
	t.Helper()
	s := Server{Name: "peer", URL: f.srv.URL, A2A: true}
	if tweak != nil {
		tweak(&s)
	}
	logs := &testkit.Log{}
	p, err := NewPool(&PoolOptions{Servers: []Server{s}, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, logs
}

func (f *fakePeer) turn(t *testing.T, tweak func(*Server)) (*Turn, *testkit.Log) {
	t.Helper()
	p, logs := f.pool(t, tweak)
	cat := p.Catalogue(context.Background())
	if strings.Contains(cat.Problems()["peer"], "could not be listed") {
		t.Fatalf("problems: %v\n%s", cat.Problems(), logs)
	}
	return cat.Resolve([]string{"peer"}, nil, nil, nil), logs
}

func task(id, state string, artifacts []map[string]any, status ...map[string]any) map[string]any {
	st := map[string]any{"state": state}
	if len(status) > 0 {
		st["message"] = status[0]
	}
	return map[string]any{"kind": "task", "id": id, "contextId": "c1", "status": st, "artifacts": artifacts}
}

func artifact(parts ...map[string]any) []map[string]any {
	return []map[string]any{{"artifactId": "a1", "parts": parts}}
}

func agentMessage(parts ...map[string]any) map[string]any {
	return map[string]any{"kind": "message", "messageId": "m", "role": "agent", "parts": parts}
}

func textPart(s string) map[string]any { return map[string]any{"kind": "text", "text": s} }

// A skill is a tool: named <peer>__<id>, described, with the {text, data} input; the call is
// one message/send naming the skill, with the credential on every request.
func TestA2ASkillIsATool(t *testing.T) {
	f := newFakePeer(t)
	f.answer = func(method string, params json.RawMessage) (any, *rpcError) {
		var p struct {
			Message struct {
				Parts    []map[string]any `json:"parts"`
				Metadata map[string]any   `json:"metadata"`
			} `json:"message"`
			Configuration struct {
				Blocking *bool `json:"blocking"`
			} `json:"configuration"`
		}
		json.Unmarshal(params, &p)
		switch p.Message.Metadata[SkillMetaKey] {
		case "stock":
			sku := p.Message.Parts[0]["data"].(map[string]any)["sku"]
			return task("t1", "completed", artifact(map[string]any{"kind": "data", "data": map[string]any{"sku": sku, "in_stock": 7}})), nil
		case "echo":
			return agentMessage(textPart(strings.ToUpper(p.Message.Parts[0]["text"].(string)))), nil
		}
		return nil, &rpcError{Code: -32602, Message: "no such skill"}
	}
	turn, logs := f.turn(t, func(s *Server) {
		s.Bearer = func(context.Context) (string, error) { return "tok-s3cret", nil }
	})
	if d := cmp.Diff([]string{"peer__echo", "peer__stock"}, turn.Names()); d != "" {
		t.Fatalf("names (-want +got):\n%s", d)
	}
	if got := wantOK(t, call(t, turn, "peer__stock", `{"data":{"sku":"A","n":12345678901234567890}}`)); got != `{"in_stock":7,"sku":"A"}` {
		t.Errorf("stock = %s", got)
	}
	if got := wantOK(t, call(t, turn, "peer__echo", `{"text":"hi"}`)); got != `"HI"` {
		t.Errorf("echo = %s", got)
	}
	wantKind(t, call(t, turn, "peer__echo", `{"txt":"hi"}`), failure.InvalidArguments)
	wantKind(t, call(t, turn, "peer__echo", `{}`), failure.InvalidArguments)
	info, fe := turn.ToolInfo(t.Context(), "peer__stock")
	if fe != nil || info.Title != "Stock" || !strings.HasPrefix(info.Description, "Stock of a SKU.") {
		t.Errorf("info = %+v", info)
	}
	sends := f.calls("message/send")
	if len(sends) != 2 {
		t.Fatalf("%d message/send, want 2 (the invalid arguments never leave)", len(sends))
	}
	for _, r := range append(sends, f.calls("card")...) {
		if r.auth != "Bearer tok-s3cret" {
			t.Errorf("%s sent with Authorization %q", r.method, r.auth)
		}
	}
	if !strings.Contains(string(sends[0].params), `"n":12345678901234567890`) {
		t.Errorf("the program's number was not sent as written: %s", sends[0].params)
	}
	var p struct {
		Configuration struct {
			Blocking      *bool `json:"blocking"`
			HistoryLength *int  `json:"historyLength"`
		} `json:"configuration"`
	}
	json.Unmarshal(sends[0].params, &p)
	if p.Configuration.Blocking == nil || *p.Configuration.Blocking || p.Configuration.HistoryLength == nil || *p.Configuration.HistoryLength != 0 {
		t.Errorf("configuration %s, want non-blocking without history", sends[0].params)
	}
	if strings.Contains(logs.String(), "s3cret") {
		t.Errorf("credential logged:\n%s", logs)
	}
}

// The card is untrusted: bounded in size, skills, names and descriptions; what is cut is
// skipped and reported, never mangled.
func TestA2ACardBounds(t *testing.T) {
	f := newFakePeer(t)
	long := strings.Repeat("d", 100_000)
	f.skills = []map[string]any{
		{"id": "ok", "name": "A\nname", "description": long, "examples": []string{"one", "two\nlines"}, "tags": []string{}},
		{"id": "ok", "name": "again", "description": "", "tags": []string{}},
		{"id": "bad name", "name": "", "description": "", "tags": []string{}},
		{"id": "line\nbreak", "name": "", "description": "", "tags": []string{}},
		{"id": strings.Repeat("x", 129), "name": "", "description": "", "tags": []string{}},
		{"id": "", "name": "", "description": "", "tags": []string{}},
		{"id": "dots.and-dashes_1", "name": "", "description": "", "tags": []string{}},
	}
	for i := range maxSkills {
		f.skills = append(f.skills, map[string]any{"id": fmt.Sprintf("s%d", i), "name": "", "description": "", "tags": []string{}})
	}
	p, _ := f.pool(t, nil)
	cat := p.Catalogue(context.Background())
	turn := cat.Resolve([]string{"peer"}, nil, nil, nil)
	names := turn.Names()
	if len(names) != maxSkills-5 || names[0] != "peer__dots.and-dashes_1" || !strings.Contains(strings.Join(names, " "), "peer__ok ") {
		t.Errorf("%d names, first %v", len(names), names[:3])
	}
	info, _ := turn.ToolInfo(t.Context(), "peer__ok")
	if len(info.Description) > maxDescriptionBytes || info.Title != "A name" || !strings.Contains(info.Description, "cut]") {
		t.Errorf("description of %d bytes, title %q", len(info.Description), info.Title)
	}
	problem := cat.Problems()["peer"]
	for _, want := range []string{"skipped 4 tools whose names break the MCP rules", `"bad name"`, "skipped 1 tool listed twice",
		"shortened 1 tool", "the agent card was cut after 512 skills of 519"} {
		if !strings.Contains(problem, want) {
			t.Errorf("the catalogue does not say %q: %s", want, problem)
		}
	}
	if strings.Contains(problem, strings.Repeat("x", 100)) {
		t.Errorf("a skipped name was said whole")
	}

	// A card over the bound is not read at all.
	f.card = func(string) any { return []byte(`{"name":"` + strings.Repeat("n", maxCardBytes) + `"}`) }
	p, _ = f.pool(t, nil)
	if cat := p.Catalogue(context.Background()); cat.Problems()["peer"] == "" || len(cat.Tools()) != 0 {
		t.Errorf("an oversized card gave %d tools, problems %v", len(cat.Tools()), cat.Problems())
	}
}

// The card names where calls go, but not where the credential goes: an endpoint on another
// origin is refused, and so is a 0.3-shaped card that declares A2A 1.0 (a 1.0 card names its
// endpoints in supportedInterfaces: a2a_v1_test.go).
func TestA2AEndpointOrigin(t *testing.T) {
	other := newFakePeer(t)
	f := newFakePeer(t)
	for _, c := range []struct {
		name string
		card func(string) any
	}{
		{"another origin", func(string) any {
			return map[string]any{"name": "x", "protocolVersion": "0.3.0", "url": other.srv.URL + "/rpc", "skills": f.skills}
		}},
		{"another transport", func(base string) any {
			return map[string]any{"name": "x", "protocolVersion": "0.3.0", "url": base + "/rpc", "preferredTransport": "GRPC", "skills": f.skills}
		}},
		{"1.0 without supportedInterfaces", func(base string) any {
			return map[string]any{"name": "x", "protocolVersion": "1.0", "url": base + "/rpc", "skills": f.skills}
		}},
	} {
		f.card = c.card
		p, logs := f.pool(t, func(s *Server) {
			s.Bearer = func(context.Context) (string, error) { return "tok-s3cret", nil }
		})
		cat := p.Catalogue(context.Background())
		if cat.Problems()["peer"] == "" || len(cat.Tools()) != 0 {
			t.Errorf("%s: %d tools, problems %v", c.name, len(cat.Tools()), cat.Problems())
		}
		t.Logf("%s: %s", c.name, logs)
	}
	if n := len(other.calls("card")) + len(other.calls("message/send")); n != 0 {
		t.Errorf("the other origin got %d requests", n)
	}

	// A redirect of the card to another origin is not followed, so it gets no credential.
	redirect := httptest.NewServer(http.RedirectHandler(other.srv.URL+"/.well-known/agent-card.json", http.StatusFound))
	defer redirect.Close()
	p, err := NewPool(&PoolOptions{Servers: []Server{{Name: "peer", URL: redirect.URL, A2A: true,
		Bearer: func(context.Context) (string, error) { return "tok-s3cret", nil }}}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if cat := p.Catalogue(context.Background()); cat.Problems()["peer"] == "" {
		t.Errorf("a cross-origin redirect was followed")
	}
	if n := len(other.calls("card")); n != 0 {
		t.Errorf("the redirect target got %d requests", n)
	}
}

// A task the peer leaves open is polled with tasks/get until it ends; one still open at the
// call's timeout is cancelled on the peer and the call is a timeout.
func TestA2AOpenTask(t *testing.T) {
	f := newFakePeer(t)
	var mu sync.Mutex
	polls := 0
	f.answer = func(method string, params json.RawMessage) (any, *rpcError) {
		mu.Lock()
		defer mu.Unlock()
		if method == "message/send" {
			return task("t1", "submitted", nil), nil
		}
		polls++
		if polls < 3 {
			return task("t1", "working", nil), nil
		}
		return task("t1", "completed", nil, agentMessage(textPart("done"))), nil
	}
	turn, _ := f.turn(t, nil)
	if got := wantOK(t, call(t, turn, "peer__stock", `{"text":"A"}`)); got != `"done"` {
		t.Errorf("value %s", got)
	}
	if n := len(f.calls("tasks/get")); n != 3 {
		t.Errorf("%d polls, want 3", n)
	}

	f.answer = func(method string, params json.RawMessage) (any, *rpcError) {
		return task("t1", "working", nil), nil
	}
	turn, _ = f.turn(t, func(s *Server) { s.CallTimeout = 300 * time.Millisecond })
	start := time.Now()
	r := call(t, turn, "peer__stock", `{"text":"A"}`)
	wantKind(t, r, failure.Timeout)
	if !r.Called || time.Since(start) > gate.Scaled(5*time.Second) {
		t.Errorf("reply %+v after %v", r, time.Since(start))
	}
	cancels := f.calls("tasks/cancel")
	if len(cancels) != 1 || !strings.Contains(string(cancels[0].params), `"id":"t1"`) {
		t.Errorf("tasks/cancel requests: %+v", cancels)
	}

	// A call that ends while its message is on the way still learns the task and cancels it.
	f.answer = func(method string, params json.RawMessage) (any, *rpcError) {
		if method == "message/send" {
			time.Sleep(400 * time.Millisecond)
		}
		return task("t1", "working", nil), nil
	}
	turn, _ = f.turn(t, func(s *Server) { s.CallTimeout = 100 * time.Millisecond })
	wantKind(t, call(t, turn, "peer__stock", `{"text":"A"}`), failure.Timeout)
	if n := len(f.calls("tasks/cancel")); n != 2 {
		t.Errorf("%d tasks/cancel in all, want 2: a task opened as its call ended was left running", n)
	}
}

// What a peer answers that is not a result: its own errors, ended tasks and hostile
// transports. A call that may have reached the peer is never sent again.
func TestA2AFailures(t *testing.T) {
	for _, c := range []struct {
		name    string
		answer  any
		rpcErr  *rpcError
		kind    failure.Kind
		message string
	}{
		{"failed task", task("t1", "failed", nil, agentMessage(textPart("out of stock"))), nil, failure.ToolError, "out of stock"},
		{"rejected task", task("t1", "rejected", nil), nil, failure.ToolError, "ended rejected"},
		{"input required", task("t1", "input-required", nil, agentMessage(textPart("which one?"))), nil, failure.ToolError, "which one?"},
		{"invalid params", nil, &rpcError{Code: -32602, Message: "bad\nparams"}, failure.ToolError, "A2A error -32602: bad params"},
		{"method not found", nil, &rpcError{Code: -32601, Message: "no"}, failure.UpstreamError, "failed to answer"},
		{"not a task", map[string]any{"kind": "status-update"}, nil, failure.UpstreamError, "failed to answer"},
		{"event stream", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {}\n\n")
		}), nil, failure.UpstreamError, "failed to answer"},
		{"too large", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":"` + strings.Repeat("x", 70_000) + `"}`))
		}), nil, failure.UpstreamError, "failed to answer"},
		{"dropped", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		}), nil, failure.UpstreamError, "it was not retried"},
		{"status 500", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "boom", http.StatusInternalServerError)
		}), nil, failure.UpstreamError, "failed to answer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakePeer(t)
			f.answer = func(method string, _ json.RawMessage) (any, *rpcError) {
				if method == "tasks/get" {
					return task("t1", "completed", nil), nil
				}
				return c.answer, c.rpcErr
			}
			turn, _ := f.turn(t, func(s *Server) { s.MaxFrameBytes = 64 << 10 })
			r := call(t, turn, "peer__stock", `{"text":"A"}`)
			wantKind(t, r, c.kind)
			if !strings.Contains(r.Message, c.message) || !r.Called {
				t.Errorf("reply %+v, want a message with %q", r, c.message)
			}
			if n := len(f.calls("message/send")); n != 1 {
				t.Errorf("message/send sent %d times", n)
			}
			if c.name == "input required" && len(f.calls("tasks/cancel")) != 1 {
				t.Errorf("a task waiting for input was not let go of")
			}
		})
	}
}

// A peer that is down was not called; the card is read again at the next turn, and the last
// known skills stay (unavailable only once nothing is known).
func TestA2APeerDown(t *testing.T) {
	f := newFakePeer(t)
	f.answer = func(string, json.RawMessage) (any, *rpcError) { return agentMessage(textPart("ok")), nil }
	p, _ := f.pool(t, nil)
	turn := p.Catalogue(context.Background()).Resolve([]string{"peer"}, nil, nil, nil)
	wantOK(t, call(t, turn, "peer__echo", `{"text":"x"}`))
	f.srv.Close()
	r := call(t, turn, "peer__echo", `{"text":"x"}`)
	wantKind(t, r, failure.UpstreamError)
	if r.Called || !strings.Contains(r.Message, "could not be reached") {
		t.Errorf("reply %+v, want not called", r)
	}
	cat := p.Catalogue(context.Background())
	if cat.Problems()["peer"] == "" || len(cat.Tools()) != 2 {
		t.Errorf("after the failure: %d tools, problems %v", len(cat.Tools()), cat.Problems())
	}
}

// An answer reaches a program as an MCP tool's would: one text part is its text, one data
// part its value, several parts a list of blocks.
func TestA2AAnswers(t *testing.T) {
	csv := map[string]any{"kind": "file", "file": map[string]any{"name": "r.csv", "mimeType": "text/csv", "bytes": "Y29sCjEK"}}
	png := map[string]any{"kind": "file", "file": map[string]any{"mimeType": "image/png", "bytes": "aGVsbG8="}}
	link := map[string]any{"kind": "file", "file": map[string]any{"name": "big.bin", "uri": "https://files.example/big.bin"}}
	data := map[string]any{"kind": "data", "data": map[string]any{"n": 1}}
	for _, c := range []struct {
		name  string
		parts []map[string]any
		want  string
	}{
		{"text", []map[string]any{textPart("hi")}, `"hi"`},
		{"data", []map[string]any{data}, `{"n":1}`},
		{"texts", []map[string]any{textPart("a"), textPart("b")}, `[{"type":"text","text":"a"},{"type":"text","text":"b"}]`},
		{"mixed", []map[string]any{textPart("a"), data, csv},
			`[{"type":"text","text":"a"},{"type":"data","data":{"n":1}},{"type":"resource","resource":{"uri":"a2a:file/r.csv","mimeType":"text/csv","blob":"Y29sCjEK"}}]`},
		{"files", []map[string]any{png, link},
			`[{"type":"image","mimeType":"image/png","data":"aGVsbG8="},{"type":"resource_link","uri":"https://files.example/big.bin","name":"big.bin"}]`},
		{"none", nil, `[]`},
	} {
		f := newFakePeer(t)
		f.answer = func(string, json.RawMessage) (any, *rpcError) {
			return task("t1", "completed", artifact(c.parts...)), nil
		}
		turn, _ := f.turn(t, nil)
		if got := wantOK(t, call(t, turn, "peer__stock", `{"text":"x"}`)); got != c.want {
			t.Errorf("%s: value %s, want %s", c.name, got, c.want)
		}
	}
}
