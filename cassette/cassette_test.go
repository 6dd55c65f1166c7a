package cassette

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/binding"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
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
			Answer: toolcall.Answer{Value: json.RawMessage(`{"token":"x","echo":"Bearer ` + bearer + `"}`)}})
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
		binding.TapedCall{Seq: 1, Name: "m__add", Args: json.RawMessage(`{"a":1,"password":"p"}`), Answer: toolcall.Answer{Value: json.RawMessage(`2`)}},
		binding.TapedCall{Seq: 2, Name: "m__add", Args: json.RawMessage(`{"a":2}`), Answer: toolcall.Answer{Kind: failure.ToolError, Message: "no"}},
		binding.TapedCall{Seq: 3, Name: "m__add", Args: json.RawMessage(`{"a":3}`), Answer: toolcall.Answer{Handle: &toolcall.Handle{ID: "h", Size: 9}}, Kept: []byte("123456789")})
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

// TestResumedJournal: a program run again from its journal has its journaled calls answered
// from it, not made; the call it paused on, made again the same, goes live and so does every
// later one, and the new journal holds them all. Taking another path at any journaled call
// or at the paused one is replay_diverged for it and every later call, so nothing past the
// divergence is made; ending before the paused call is a divergence too.
func TestResumedJournal(t *testing.T) {
	first := NewJournal()
	first.Play(1, "m__read", json.RawMessage(`{"id":1}`))
	first.Record(binding.TapedCall{Seq: 1, Name: "m__read", Args: json.RawMessage(`{"id":1,"token":"s3cret"}`), Answer: toolcall.Answer{Value: json.RawMessage(`{"n":7}`)}})
	first.Play(2, "m__wipe", json.RawMessage(`{"id":1}`))
	if got := first.InFlight(2); len(got) != 0 {
		t.Errorf("in flight besides the paused call: %v", got)
	}
	first.Play(3, "m__read", json.RawMessage(`{"id":2}`))
	if got := first.InFlight(2); len(got) != 1 || got[0] != 3 {
		t.Errorf("in flight besides the paused call: %v, want [3]", got)
	}
	calls := first.Calls()
	if len(calls) != 1 || string(calls[0].Result) != `{"n":7}` || strings.Contains(string(calls[0].Arguments), "s3cret") {
		t.Fatalf("journal %+v", calls)
	}
	pending := PendingCall(2, "m__wipe", `{"id":1}`)

	j := NewResumedJournal(calls, pending)
	if a, ok := j.Play(1, "m__read", json.RawMessage(`{"token":"other","id":1}`)); !ok || string(a.Value) != `{"n":7}` {
		t.Errorf("journaled call answered %+v, %v", a, ok)
	}
	if _, ok := j.Play(2, "m__wipe", json.RawMessage(`{"id":1}`)); ok {
		t.Errorf("the paused call was answered from the journal, want made")
	}
	j.Record(binding.TapedCall{Seq: 2, Name: "m__wipe", Args: json.RawMessage(`{"id":1}`), Answer: toolcall.Answer{Value: json.RawMessage(`"wiped"`)}})
	if _, ok := j.Play(3, "m__read", json.RawMessage(`{"id":9}`)); ok {
		t.Errorf("a call past the pause was answered, want made")
	}
	if d := j.Divergence(); d != nil || j.Replayed() != 1 || len(j.Calls()) != 2 {
		t.Errorf("divergence %+v, replayed %d, calls %d; want none, 1, 2", d, j.Replayed(), len(j.Calls()))
	}

	for _, c := range []struct {
		name  string
		calls [][2]string // tool, arguments, in order
		seq   int
	}{
		{"another first call", [][2]string{{"m__read", `{"id":5}`}, {"m__wipe", `{"id":1}`}}, 1},
		{"another paused call", [][2]string{{"m__read", `{"id":1,"token":"t"}`}, {"m__wipe", `{"id":2}`}, {"m__read", `{"id":3}`}}, 2},
		{"another tool at the pause", [][2]string{{"m__read", `{"id":1,"token":"t"}`}, {"m__read", `{"id":1}`}}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := NewResumedJournal(calls, pending)
			for i, call := range c.calls {
				a, ok := j.Play(i+1, call[0], json.RawMessage(call[1]))
				if i+1 >= c.seq && (!ok || a.Kind != failure.ReplayDiverged) {
					t.Errorf("call %d answered %+v, %v; want replay_diverged, not made", i+1, a, ok)
				}
			}
			if d := j.Divergence(); d == nil || d.Seq != c.seq {
				t.Errorf("divergence %+v, want at %d", d, c.seq)
			}
		})
	}
	ended := NewResumedJournal(calls, pending)
	ended.Play(1, "m__read", json.RawMessage(`{"id":1,"token":"t"}`))
	if d := ended.Divergence(); d == nil || d.Seq != 2 || d.Actual != nil {
		t.Errorf("ended before the paused call: divergence %+v, want at 2", d)
	}
}
