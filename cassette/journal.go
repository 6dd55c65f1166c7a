package cassette

import (
	"encoding/json"
	"slices"
	"sync"

	"github.com/mcp-sandbox/mcp-sandbox/binding"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
)

// Journal is the binding.Tape of a program that may pause on a person's approval: it keeps
// every call it sees answered, in a cassette's lines (arguments redacted by the tool's
// definition, results whole: they are served to the program again, never shown), and knows
// which calls are still in flight. A program resumed from an earlier journal (NewResumedJournal)
// has its calls up to the pause answered from it by a resumer Player, and is kept going live
// from there. Safe for concurrent use.
type Journal struct {
	rec  *Recorder
	play *Player // nil: nothing is replayed
	prev []Call  // the calls replayed, as the earlier journal has them

	mu      sync.Mutex // guards started
	started map[int]bool
}

// NewJournal returns the journal of a program run from its start.
func NewJournal() *Journal { return &Journal{rec: NewRecorder(nil, 0), started: map[int]bool{}} }

// NewResumedJournal returns the journal of a program run again after a pause: calls answers
// its calls up to the pause, pending is the call it paused on (NewResumer).
func NewResumedJournal(calls []Call, pending *Call) *Journal {
	j := NewJournal()
	j.prev, j.play = calls, NewResumer(calls, pending)
	return j
}

// Play answers the calls the journal resumes from; any other is made, and is in flight until
// Record sees its answer.
func (j *Journal) Play(seq int, name string, args json.RawMessage) (toolcall.Answer, bool) {
	if j.play != nil {
		if a, ok := j.play.Play(seq, name, args); ok {
			return a, true
		}
	}
	j.mu.Lock()
	j.started[seq] = true
	j.mu.Unlock()
	return toolcall.Answer{}, false
}

// Record keeps a call made, once answered.
func (j *Journal) Record(c binding.TapedCall) {
	j.rec.Record(c)
	j.mu.Lock()
	delete(j.started, c.Seq)
	j.mu.Unlock()
}

// Tools adds no name to the program's.
func (*Journal) Tools() []string { return nil }

// KeptBytes is 0: a journal keeps a result under a handle as the handle alone, which the
// resumed program is answered with (binding reads none of it for the tape).
func (*Journal) KeptBytes() int64 { return 0 }

// Calls are the calls answered so far, replayed ones first, in order of their numbers.
func (j *Journal) Calls() []Call {
	j.rec.mu.Lock()
	calls := append(slices.Clone(j.prev), j.rec.calls...)
	j.rec.mu.Unlock()
	slices.SortFunc(calls, func(a, b Call) int { return a.Seq - b.Seq })
	return calls
}

// InFlight are the calls made and not yet answered, but for except.
func (j *Journal) InFlight(except int) []int {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []int
	for s := range j.started {
		if s != except {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// Paused is the journal as a pause at call seq keeps it (approval.Journal): the calls answered
// so far, as JSON lines, and whether a program run again from them could reach call seq: every
// call before it answered, in order, none after it, and no other in flight (whose outcome
// would be unknown).
func (j *Journal) Paused(seq int) (json.RawMessage, bool) {
	calls := j.Calls()
	resumable := len(calls) == max(seq-1, 0) && len(j.InFlight(seq)) == 0
	for i, c := range calls {
		if c.Seq != i+1 || c.Seq >= seq {
			resumable = false // a call after the paused one ended first: not journaled in order
		}
	}
	b, err := json.Marshal(calls)
	if err != nil {
		return nil, false
	}
	return b, resumable
}

// Resuming reports whether the journal resumes an earlier one.
func (j *Journal) Resuming() bool { return j.play != nil }

// Replayed is how many calls were answered from the earlier journal.
func (j *Journal) Replayed() int {
	if j.play == nil {
		return 0
	}
	return j.play.Played()
}

// Divergence is where the program left the journal it resumed from, once it has ended; nil
// when it made every journaled call and the pending one (or resumed nothing).
func (j *Journal) Divergence() *Divergence {
	if j.play == nil {
		return nil
	}
	return j.play.Divergence()
}

// PendingCall is the line a journal keeps of the call paused on: its tool and arguments
// redacted as the journal's are.
func PendingCall(seq int, tool, redacted string) *Call {
	return &Call{Seq: seq, Tool: tool, Arguments: argumentsJSON(redacted), Outcome: "pending", Approval: "pending"}
}

// argumentsJSON is a redaction as a Call's Arguments: JSON, or a string of what is not.
func argumentsJSON(s string) json.RawMessage {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}
