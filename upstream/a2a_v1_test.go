package upstream

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/go-cmp/cmp"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// v1Card is a 1.0 card listing ifs, with the fake's skills.
func (f *fakePeer) v1Card(ifs ...map[string]any) func(string) any {
	return func(string) any {
		return map[string]any{"name": "fake", "version": "1", "supportedInterfaces": ifs, "skills": f.skills,
			"capabilities": map[string]any{}, "securitySchemes": map[string]any{"bearer": map[string]any{"httpAuthSecurityScheme": map[string]any{"scheme": "Bearer"}}}}
	}
}

func v1If(url, binding, version string) map[string]any {
	return map[string]any{"url": url, "protocolBinding": binding, "protocolVersion": version}
}

func v1TaskJSON(id string, state any, parts ...map[string]any) map[string]any {
	t := map[string]any{"id": id, "contextId": "c1", "status": map[string]any{"state": state}}
	if parts != nil {
		t["artifacts"] = []map[string]any{{"artifactId": "a1", "parts": parts}}
	}
	return t
}

// A 1.0 agent is spoken to in 1.0: its card asked for with A2A-Version 1.0, the JSON-RPC
// interface of 1.x picked over 0.3 and other bindings, its tenant sent, 1.0's method names
// and shapes, and its answers read as 0.3's are: parts, polls, results.
func TestA2AV1SkillIsATool(t *testing.T) {
	f := newFakePeer(t)
	other := newFakePeer(t)
	f.card = func(base string) any {
		in := v1If(base+"/rpc", "JSONRPC", "1.0.0")
		in["tenant"] = "acme"
		return f.v1Card(v1If(other.srv.URL+"/grpc", "GRPC", "1.0"), v1If(base+"/rpc", "JSONRPC", "0.3"), in)(base)
	}
	polls := 0
	f.answer = func(method string, params json.RawMessage) (any, *rpcError) {
		switch method {
		case "SendMessage":
			return map[string]any{"task": v1TaskJSON("t1", "TASK_STATE_SUBMITTED")}, nil
		case "GetTask":
			if polls++; polls < 2 {
				return v1TaskJSON("t1", 2), nil // protobuf JSON may send an enum's number
			}
			return v1TaskJSON("t1", "TASK_STATE_COMPLETED",
				map[string]any{"text": "a"},
				map[string]any{"data": []any{1, 2}},
				map[string]any{"raw": "aGVsbG8-", "mediaType": "image/png"}, // URL-safe base64
				map[string]any{"url": "https://files.example/r.csv", "filename": "r.csv", "mediaType": "text/csv"},
			), nil
		}
		return nil, &rpcError{Code: -32601, Message: "Invalid method."}
	}
	turn, logs := f.turn(t, func(s *Server) {
		s.Bearer = func(context.Context) (string, error) { return "tok-s3cret", nil }
	})
	got := wantOK(t, call(t, turn, "peer__stock", `{"text":"A","data":{"n":12345678901234567890}}`))
	want := `[{"type":"text","text":"a"},{"type":"data","data":{"value":[1,2]}},` +
		`{"type":"image","mimeType":"image/png","data":"aGVsbG8+"},` +
		`{"type":"resource_link","mimeType":"text/csv","uri":"https://files.example/r.csv","name":"r.csv"}]`
	if got != want {
		t.Errorf("value\n%s, want\n%s", got, want)
	}
	if n := len(other.calls("card")) + len(other.requests); n != 0 {
		t.Errorf("the gRPC interface on another origin got %d requests", n)
	}
	for _, r := range f.requests {
		wantVersion := "1.0"
		if r.auth != "Bearer tok-s3cret" || r.version != wantVersion {
			t.Errorf("%s sent with Authorization %q, A2A-Version %q", r.method, r.auth, r.version)
		}
	}
	sends := f.calls("SendMessage")
	if len(sends) != 1 || len(f.calls("GetTask")) != 2 || len(f.calls("message/send")) != 0 {
		t.Fatalf("requests %+v", f.requests)
	}
	var p map[string]any
	dec := json.NewDecoder(strings.NewReader(string(sends[0].params)))
	dec.UseNumber()
	dec.Decode(&p)
	msg, _ := p["message"].(map[string]any)
	if id, _ := msg["messageId"].(string); id == "" {
		t.Errorf("no messageId: %s", sends[0].params)
	}
	delete(msg, "messageId")
	wantParams := map[string]any{
		"tenant": "acme",
		"message": map[string]any{"role": "ROLE_USER", "metadata": map[string]any{SkillMetaKey: "stock"},
			"parts": []any{map[string]any{"text": "A"}, map[string]any{"data": map[string]any{"n": json.Number("12345678901234567890")}}}},
		"configuration": map[string]any{"returnImmediately": true, "historyLength": json.Number("0")},
	}
	if d := cmp.Diff(wantParams, p); d != "" {
		t.Errorf("SendMessage params (-want +got):\n%s", d)
	}
	if gets := f.calls("GetTask"); !strings.Contains(string(gets[0].params), `"tenant":"acme"`) || !strings.Contains(string(gets[0].params), `"id":"t1"`) {
		t.Errorf("GetTask params %s", gets[0].params)
	}
	if strings.Contains(logs.String(), "s3cret") {
		t.Errorf("credential logged:\n%s", logs)
	}
	if !strings.Contains(logs.String(), `msg="a2a agent speaks" server=peer protocol=1.0`) {
		t.Errorf("the log does not say which version the agent is spoken to in:\n%s", logs)
	}
}

// Which interface of a card is spoken, or why none is: 0.3 listed alone is spoken as 0.3;
// what is on another origin, of another binding or of an unknown version is refused.
func TestA2AV1CardChoice(t *testing.T) {
	other := newFakePeer(t)
	for _, c := range []struct {
		name    string
		ifs     func(base string) []map[string]any
		speaks  string // the method name of the send, "" when the card is refused
		problem string
	}{
		{"1.0", func(b string) []map[string]any { return []map[string]any{v1If(b+"/rpc", "jsonrpc", "1.0")} }, "SendMessage", ""},
		{"0.3 only", func(b string) []map[string]any { return []map[string]any{v1If(b+"/rpc", "JSONRPC", "0.3.0")} }, "message/send", ""},
		{"another origin", func(b string) []map[string]any {
			return []map[string]any{v1If(other.srv.URL+"/rpc", "JSONRPC", "1.0"), v1If(b+"/rpc", "JSONRPC", "0.3")}
		}, "", "not on the configured origin"},
		{"another binding", func(b string) []map[string]any { return []map[string]any{v1If(b+"/rpc", "HTTP+JSON", "1.0")} }, "", "no JSON-RPC interface"},
		{"unknown version", func(b string) []map[string]any {
			return []map[string]any{v1If(b+"/rpc", "JSONRPC", "2.0"), v1If(b+"/rpc", "JSONRPC", "0.2")}
		}, "", "no JSON-RPC interface"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakePeer(t)
			f.card = func(base string) any { return f.v1Card(c.ifs(base)...)(base) }
			f.answer = func(method string, _ json.RawMessage) (any, *rpcError) {
				if method == "SendMessage" {
					return map[string]any{"message": map[string]any{"messageId": "m", "role": "ROLE_AGENT", "parts": []any{map[string]any{"text": "ok"}}}}, nil
				}
				return agentMessage(textPart("ok")), nil
			}
			p, logs := f.pool(t, nil)
			cat := p.Catalogue(context.Background())
			if c.speaks == "" {
				if cat.Problems()["peer"] == "" || len(cat.Tools()) != 0 || !strings.Contains(logs.String(), c.problem) {
					t.Errorf("%d tools, problems %v, log %s; want %q", len(cat.Tools()), cat.Problems(), logs, c.problem)
				}
				return
			}
			turn := cat.Resolve([]string{"peer"}, nil, nil, nil)
			if got := wantOK(t, call(t, turn, "peer__echo", `{"text":"x"}`)); got != `"ok"` {
				t.Errorf("value %s", got)
			}
			if sends := f.calls(c.speaks); len(sends) != 1 || sends[0].version != map[string]string{"SendMessage": "1.0", "message/send": "0.3"}[c.speaks] {
				t.Errorf("requests %+v", f.requests)
			}
		})
	}
	if len(other.requests) != 0 {
		t.Errorf("the other origin got %d requests", len(other.requests))
	}
}

// A 1.0 answer is checked as it is read: a part carries exactly one content, a state is one
// A2A names, an answer is a task or a message; what is not is the upstream's failure, never
// sent again. A task asking for input is the tool's error and is cancelled by CancelTask.
func TestA2AV1Answers(t *testing.T) {
	for _, c := range []struct {
		name    string
		answer  any
		kind    failure.Kind
		message string
	}{
		{"two contents", map[string]any{"message": map[string]any{"parts": []any{map[string]any{"text": "a", "url": "https://x.example"}}}}, failure.UpstreamError, "failed to answer"},
		{"no content", map[string]any{"message": map[string]any{"parts": []any{map[string]any{"mediaType": "text/plain"}}}}, failure.UpstreamError, "failed to answer"},
		{"unknown state", map[string]any{"task": v1TaskJSON("t1", "TASK_STATE_PONDERING")}, failure.UpstreamError, "failed to answer"},
		{"0.3 state", map[string]any{"task": v1TaskJSON("t1", "completed")}, failure.UpstreamError, "failed to answer"},
		{"task and message", map[string]any{"task": v1TaskJSON("t1", 3), "message": map[string]any{"parts": []any{}}}, failure.UpstreamError, "failed to answer"},
		{"a 0.3 answer", task("t1", "completed", nil), failure.UpstreamError, "failed to answer"},
		{"bad bytes", map[string]any{"message": map[string]any{"parts": []any{map[string]any{"raw": "%%%"}}}}, failure.UpstreamError, "failed to answer"},
		{"failed", map[string]any{"task": map[string]any{"id": "t1", "status": map[string]any{"state": "TASK_STATE_FAILED",
			"message": map[string]any{"role": "ROLE_AGENT", "parts": []any{map[string]any{"text": "out of stock"}}}}}}, failure.ToolError, "out of stock"},
		{"input required", map[string]any{"task": v1TaskJSON("t1", "TASK_STATE_INPUT_REQUIRED")}, failure.ToolError, "input-required"},
		{"version not supported", &rpcError{Code: -32009, Message: "The requested A2A protocol version '1.0' is not supported."}, failure.UpstreamError, "failed to answer"},
		{"completed by number", map[string]any{"task": v1TaskJSON("t1", 3, map[string]any{"data": map[string]any{"n": 1}})}, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakePeer(t)
			f.card = func(base string) any { return f.v1Card(v1If(base+"/rpc", "JSONRPC", "1.0"))(base) }
			f.answer = func(method string, _ json.RawMessage) (any, *rpcError) {
				if method == "CancelTask" {
					return v1TaskJSON("t1", "TASK_STATE_CANCELED"), nil
				}
				if e, ok := c.answer.(*rpcError); ok {
					return nil, e
				}
				return c.answer, nil
			}
			turn, _ := f.turn(t, nil)
			r := call(t, turn, "peer__stock", `{"text":"A"}`)
			if c.kind == "" {
				if got := wantOK(t, r); got != `{"n":1}` {
					t.Errorf("value %s", got)
				}
				return
			}
			wantKind(t, r, c.kind)
			if !strings.Contains(r.Message, c.message) || !r.Called {
				t.Errorf("reply %+v, want a message with %q", r, c.message)
			}
			if n := len(f.calls("SendMessage")); n != 1 {
				t.Errorf("SendMessage sent %d times", n)
			}
			if cancels := f.calls("CancelTask"); (c.name == "input required") != (len(cancels) == 1) {
				t.Errorf("CancelTask requests: %+v", cancels)
			}
		})
	}
}

// FuzzV1Answer reads hostile SendMessage and GetTask results: an error or a task and message
// of a2a-go v2's model, never a panic; and what is read renders as a result or fails cleanly.
func FuzzV1Answer(f *testing.F) {
	for _, seed := range []string{
		`{"task":{"id":"t","status":{"state":"TASK_STATE_COMPLETED"},"artifacts":[{"parts":[{"text":"a"},{"data":[1]},{"raw":"aGk="},{"url":"u"}]}]}}`,
		`{"message":{"parts":[{"data":null,"text":"x"}]}}`,
		`{"task":{"status":{"state":8,"message":{"parts":[{}]}}}}`,
		`{"task":null,"message":null}`, `[]`, `null`, `{"task":{"status":{"state":-1}}}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v10 := dialect{version: a2aV10}
		if ev, err := v10.sendAnswer(json.RawMessage(raw)); err == nil {
			switch ev := ev.(type) {
			case *a2a.Message:
				partsResult(ev.Parts)
			case *a2a.Task:
				if ev.Status.State == "" {
					t.Errorf("a task without a state was read: %s", raw)
				}
				for _, a := range ev.Artifacts {
					partsResult(a.Parts)
				}
			default:
				t.Errorf("read as %T", ev)
			}
		}
		v10.taskAnswer(json.RawMessage(raw))
	})
}
