package cassette

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/binding"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
)

// TestJudge: a replay is the same only with the recorded calls and value; a call that was
// not the recording's is diverged, named by both calls in the one text of a divergence; the
// recorded calls with another value, or a failure, are a different value.
func TestJudge(t *testing.T) {
	c, _ := record(t, nil, binding.TapedCall{Seq: 1, Name: "m__add", Args: json.RawMessage(`{"a":1}`), Answer: toolcall.Answer{Value: json.RawMessage(`2`)}})
	played := func(args string) *Player {
		p := NewPlayer(c)
		p.Play(1, "m__add", json.RawMessage(args))
		return p
	}
	if v := Judge("c.jsonl", c, played(`{"a":1}`), json.RawMessage(` 1 `), nil); v.Verdict != Same || v.Line() != "c.jsonl: same" || v.CallsRecorded != 1 {
		t.Errorf("the recorded call and value: %+v %q", v, v.Line())
	}
	v := Judge("c.jsonl", c, played(`{"a":9}`), json.RawMessage(`1`), nil)
	if v.Verdict != Diverged || !strings.Contains(v.Line(), "diverged at 1") ||
		!strings.Contains(v.Line(), `recorded: m__add {"a":1}`) || !strings.Contains(v.Line(), `actual:   m__add {"a":9}`) {
		t.Errorf("another argument: %+v\n%s", v, v.Line())
	}
	if v := Judge("c.jsonl", c, NewPlayer(c), json.RawMessage(`1`), nil); v.Verdict != Diverged || !strings.Contains(v.Line(), "no call (the program ended first)") {
		t.Errorf("the recorded call never made: %+v\n%s", v, v.Line())
	}
	for _, v := range []*Verdict{
		Judge("c.jsonl", c, played(`{"a":1}`), json.RawMessage(`2`), nil),
		Judge("c.jsonl", c, played(`{"a":1}`), json.RawMessage(`1`), map[string]string{"kind": "timeout"}),
	} {
		if v.Verdict != DifferentValue || !strings.Contains(v.Line(), "different value") {
			t.Errorf("another value or a failure: %+v\n%s", v, v.Line())
		}
	}
	if v := UnreadableVerdict("gone.jsonl", errors.New("no such file")); v.Verdict != Unreadable || v.Line() != "gone.jsonl: unreadable: no such file" {
		t.Errorf("unreadable: %+v %q", v, v.Line())
	}
}
