package cassette

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/mcp-sandbox/mcp-sandbox/binding"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
	"github.com/mcp-sandbox/mcp-sandbox/toolshape"
)

// Player is the binding.Tape of `replay`: it answers every call from the cassette by sequence
// number, until the first call that is not the recorded one. Safe for concurrent use.
type Player struct {
	c *Cassette
	// live: a call past the recorded ones is not answered but made (a paused program resumed
	// from its journal, NewResumer); pending, when set, is what the first of them must be.
	live    bool
	pending *Call
	reached bool   // the pending call was made
	what    string // "cassette", or "journal"

	mu     sync.Mutex // guards played and div
	played int
	div    *Divergence
}

// Divergence is the first call that was not the cassette's: Recorded is nil past its end, and
// Actual is nil when the program made fewer calls than were recorded.
type Divergence struct {
	Seq      int     `json:"seq"`
	Recorded *Call   `json:"recorded"`
	Actual   *Actual `json:"actual"`
}

// Actual is a call the replayed program made, its arguments redacted as the recording's were.
type Actual struct {
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

// NewPlayer returns a Player of c.
func NewPlayer(c *Cassette) *Player { return &Player{c: c, what: "cassette"} }

// NewResumer returns the Player of a paused program run again from its journal: calls are
// answered from it up to its end, exactly as a cassette's; the first call past it must be
// pending (the call the person was asked about: same tool, same arguments), and it and every
// later call are not answered (Play's ok is false), so they are made. A call that is not the
// journal's, pending included, is replay_diverged, and so is every call after it: nothing
// past a divergence is made.
func NewResumer(calls []Call, pending *Call) *Player {
	return &Player{c: &Cassette{Calls: calls}, live: true, pending: pending, what: "journal"}
}

// Played is how many recorded calls were answered.
func (p *Player) Played() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.played
}

// Tools are the upstream tools the cassette recorded, so the program finds its names bound.
func (p *Player) Tools() []string {
	var out []string
	for n := range p.c.Header.Tools {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Record records nothing: every call is played.
func (*Player) Record(binding.TapedCall) {}

// KeptBytes is 0: a Player records nothing.
func (*Player) KeptBytes() int64 { return 0 }

// Play answers call seq from the cassette, or with replay_diverged: for this call when it is
// not the recorded one (another tool, other arguments, past the end), and for every call after.
func (p *Player) Play(seq int, name string, args json.RawMessage) (toolcall.Answer, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.div != nil {
		return refuse("the replay diverged at call %d already; call %d is not answered", p.div.Seq, seq), true
	}
	if seq > len(p.c.Calls) && p.live {
		if seq == len(p.c.Calls)+1 && p.pending != nil {
			got := maskedArguments(args, p.pending.Arguments)
			if name != p.pending.Tool || !bytes.Equal(got, p.pending.Arguments) {
				p.div = &Divergence{Seq: seq, Recorded: p.pending, Actual: &Actual{Tool: name, Arguments: got}}
				return refuse("call %d is %s with arguments %s; the program paused on %s with arguments %s, so it took another path this time and is not carried on",
					seq, name, got, p.pending.Tool, p.pending.Arguments), true
			}
			p.reached = true
		}
		return toolcall.Answer{}, false
	}
	if seq > len(p.c.Calls) {
		p.div = &Divergence{Seq: seq, Actual: &Actual{Tool: name, Arguments: redactArguments(nil, args)}}
		return refuse("call %d (%s) is past the cassette's end: it recorded %d calls", seq, name, len(p.c.Calls)), true
	}
	rec := &p.c.Calls[seq-1]
	got := maskedArguments(args, rec.Arguments)
	if name != rec.Tool || !bytes.Equal(got, rec.Arguments) {
		p.div = &Divergence{Seq: seq, Recorded: rec, Actual: &Actual{Tool: name, Arguments: got}}
		return refuse("call %d is %s with arguments %s; the %s recorded %s with arguments %s", seq, name, got, p.what, rec.Tool, rec.Arguments), true
	}
	p.played = seq
	switch {
	case rec.Outcome != "ok":
		return toolcall.Answer{Kind: failure.Kind(rec.Outcome), Message: rec.Message}, true
	case rec.ResultRef != nil:
		h := rec.ResultRef.Handle
		return toolcall.Answer{Handle: &h}, true
	}
	return toolcall.Answer{Value: rec.Result}, true
}

// Divergence returns the first call that was not the cassette's, once the program has ended:
// a diverging call, or else the first recorded call the program never made; nil when the
// program made exactly the recorded calls (a resumer's: at least those).
func (p *Player) Divergence() *Divergence {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.div != nil {
		return p.div
	}
	if p.played < len(p.c.Calls) {
		return &Divergence{Seq: p.played + 1, Recorded: &p.c.Calls[p.played]}
	}
	if p.live && p.pending != nil && !p.reached {
		return &Divergence{Seq: len(p.c.Calls) + 1, Recorded: p.pending}
	}
	return nil
}

func refuse(format string, args ...any) toolcall.Answer {
	return toolcall.Answer{Kind: failure.ReplayDiverged, Message: fmt.Sprintf(format, args...)}
}

// maskedArguments is args redacted as the recorded arguments were: what the tool's definition
// redacted then (values recorded as toolshape.Redacted) is masked at the same places, and the
// rest redacted by key names, so equal arguments give equal bytes without the definition.
func maskedArguments(args, recorded json.RawMessage) json.RawMessage {
	var act, rec any
	d := json.NewDecoder(bytes.NewReader(args))
	d.UseNumber()
	if d.Decode(&act) != nil || json.Unmarshal(recorded, &rec) != nil {
		return redactArguments(nil, args)
	}
	b, err := json.Marshal(mask(act, rec))
	if err != nil {
		return redactArguments(nil, args)
	}
	return redactArguments(nil, b)
}

func mask(act, rec any) any {
	switch r := rec.(type) {
	case map[string]any:
		a, ok := act.(map[string]any)
		if !ok {
			return act
		}
		for k, rv := range r {
			if av, ok := a[k]; ok {
				if s, _ := rv.(string); s == toolshape.Redacted {
					a[k] = toolshape.Redacted
				} else {
					a[k] = mask(av, rv)
				}
			}
		}
		return a
	case []any:
		a, ok := act.([]any)
		if !ok {
			return act
		}
		for i := range min(len(a), len(r)) {
			a[i] = mask(a[i], r[i])
		}
		return a
	}
	return act
}
