package cassette

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/binding"
	"github.com/mcp-sandbox/mcp-sandbox/engine/wire"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

// record writes a cassette of calls, with secrets scrubbed, and reads it back.
func record(t *testing.T, secrets []string, calls ...binding.TapedCall) (*Cassette, []byte) {
	t.Helper()
	r := NewRecorder(secrets, 1<<20)
	for _, c := range calls {
		r.Record(c)
	}
	var buf bytes.Buffer
	if err := r.Write(&buf, "return 1", "sha256:v", map[string]int{"wall_seconds": 5}, map[string]any{"value": 1}); err != nil {
		t.Fatal(err)
	}
	c, err := Read(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("%v:\n%s", err, buf.Bytes())
	}
	return c, buf.Bytes()
}

// TestRecorderRedacts: a field whose key marks a secret is recorded redacted, as a log line
// shows it, and a configured secret is nowhere, not even inside another value (must show 3).
func TestRecorderRedacts(t *testing.T) {
	const field, bearer = "field-value-9876543210", "bearer-value-0123456789"
	tool := &upstream.Tool{Name: "crm__login"}
	c, b := record(t, []string{bearer},
		binding.TapedCall{Seq: 1, Name: "crm__login", Tool: tool, Args: json.RawMessage(`{"user":"ann","api_key":"` + field + `"}`),
			Answer: wire.Answer{Value: json.RawMessage(`{"token":"x","echo":"Bearer ` + bearer + `"}`)}})
	for _, s := range []string{field, bearer} {
		if bytes.Contains(b, []byte(s)) {
			t.Errorf("the cassette contains %q:\n%s", s, b)
		}
	}
	if got := string(c.Calls[0].Arguments); got != `{"api_key":"[redacted]","user":"ann"}` {
		t.Errorf("arguments recorded as %s", got)
	}
	if got := string(c.Calls[0].Result); !strings.Contains(got, `"echo":"Bearer [redacted]"`) {
		t.Errorf("result recorded as %s", got)
	}
}

// TestPlayerDiverges: the recorded calls are answered in order, a redacted field matching
// whatever its value; another argument is replay_diverged naming both calls, and so is every
// call after it; a call past the end diverges too.
func TestPlayerDiverges(t *testing.T) {
	c, _ := record(t, nil,
		binding.TapedCall{Seq: 1, Name: "m__add", Args: json.RawMessage(`{"a":1,"password":"p"}`), Answer: wire.Answer{Value: json.RawMessage(`2`)}},
		binding.TapedCall{Seq: 2, Name: "m__add", Args: json.RawMessage(`{"a":2}`), Answer: wire.Answer{Kind: failure.ToolError, Message: "no"}},
		binding.TapedCall{Seq: 3, Name: "m__add", Args: json.RawMessage(`{"a":3}`), Answer: wire.Answer{Handle: &wire.Handle{ID: "h", Size: 9}}, Kept: []byte("123456789")})
	p := NewPlayer(c)
	if a, ok := p.Play(1, "m__add", json.RawMessage(`{"password":"other","a":1}`)); !ok || string(a.Value) != "2" {
		t.Errorf("call 1 answered %+v", a)
	}
	if a, _ := p.Play(2, "m__add", json.RawMessage(`{"a":2}`)); a.Kind != failure.ToolError || a.Message != "no" {
		t.Errorf("call 2 answered %+v", a)
	}
	if p.Divergence() == nil || p.Divergence().Seq != 3 || p.Divergence().Actual != nil {
		t.Errorf("with call 3 not made, the divergence is %+v", p.Divergence())
	}
	a, _ := p.Play(3, "m__add", json.RawMessage(`{"a":30}`))
	if a.Kind != failure.ReplayDiverged || !strings.Contains(a.Message, `{"a":30}`) || !strings.Contains(a.Message, `{"a":3}`) {
		t.Errorf("call 3 answered %+v", a)
	}
	d := p.Divergence()
	if d == nil || d.Seq != 3 || d.Recorded.Tool != "m__add" || string(d.Actual.Arguments) != `{"a":30}` {
		t.Errorf("divergence %+v", d)
	}
	if a, _ := p.Play(4, "m__add", nil); a.Kind != failure.ReplayDiverged {
		t.Errorf("a call after the divergence answered %+v", a)
	}
	q := NewPlayer(c)
	for i, args := range []string{`{"a":1,"password":"p"}`, `{"a":2}`, `{"a":3}`} {
		q.Play(i+1, "m__add", json.RawMessage(args))
	}
	if a, _ := q.Play(4, "m__add", nil); a.Kind != failure.ReplayDiverged || q.Divergence().Recorded != nil {
		t.Errorf("a call past the end answered %+v, divergence %+v", a, q.Divergence())
	}
}
