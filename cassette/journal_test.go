package cassette

import (
	"encoding/json"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/binding"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
)

// BenchmarkJournal is what a journal adds to one binding call of a program that may pause
// (mcpserver keeps one whenever the client can be asked): numbering it, redacting its
// arguments and keeping its answer.
func BenchmarkJournal(b *testing.B) {
	j := NewJournal()
	args := json.RawMessage(`{"sku":"S1","api_key":"k-0123456789","filters":{"colour":"red","sizes":[1,2,3]}}`)
	answer := toolcall.Answer{Value: json.RawMessage(`{"sku":"S1","name":"Product S1","price":12}`)}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		j.Play(i+1, "support__lookup", args)
		j.Record(binding.TapedCall{Seq: i + 1, Name: "support__lookup", Args: args, Answer: answer})
	}
}

// TestJournalPaused: a pause at a call keeps the calls answered before it, and could be carried
// on from them only when they are every call before it, in order, with none in flight.
func TestJournalPaused(t *testing.T) {
	answer := toolcall.Answer{Value: json.RawMessage(`1`)}
	j := NewJournal()
	for seq := 1; seq <= 2; seq++ {
		j.Play(seq, "up__count", json.RawMessage(`{}`))
		j.Record(binding.TapedCall{Seq: seq, Name: "up__count", Answer: answer})
	}
	calls, ok := j.Paused(3)
	var lines []Call
	if err := json.Unmarshal(calls, &lines); err != nil || !ok || len(lines) != 2 || lines[1].Seq != 2 {
		t.Errorf("paused at 3 after 1 and 2: %s, resumable %v", calls, ok)
	}
	if _, ok := j.Paused(2); ok {
		t.Error("paused at 2 after 1 and 2 answered: resumable, want not (call 2 ended first)")
	}
	j.Play(4, "up__count", json.RawMessage(`{}`)) // in flight
	if _, ok := j.Paused(3); ok {
		t.Error("paused at 3 with call 4 in flight: resumable, want not")
	}
	if calls, ok := NewJournal().Paused(0); !ok || json.Unmarshal(calls, &lines) != nil || len(lines) != 0 {
		t.Errorf("a direct call's pause: %s, resumable %v; want no calls and resumable", calls, ok)
	}
}
