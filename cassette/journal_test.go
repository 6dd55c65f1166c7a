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
