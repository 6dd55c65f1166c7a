package cassette

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"slices"
	"sync"

	"github.com/mcp-sandbox/mcp-sandbox/binding"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

// maxArgumentBytes bounds a call's redacted arguments in a cassette; longer ones are cut, and
// kept as a string.
const maxArgumentBytes = 64 << 10

// Recorder is the binding.Tape of `run --record`: it keeps each call, redacted, until Write.
// Safe for concurrent use.
type Recorder struct {
	secrets []string
	kept    int64

	mu    sync.Mutex // guards calls, tools and keptSum
	calls []Call
	tools map[string]string
	// keptSum are the kept bytes of the results recorded so far, all calls together.
	keptSum int64
}

// MaxKeptTotal bounds the kept bytes of one cassette, all its results under handles together:
// a program making many large calls keeps the first ones and then the handles alone, so a
// server recording it holds a bounded amount (calls in flight at once may each still keep
// their own share).
const MaxKeptTotal = 64 << 20

// NewRecorder returns a Recorder that writes none of secrets: every occurrence, anywhere in the
// cassette, is replaced with "[redacted]". Of a result kept under a handle it keeps the first
// keptBytes (configs' cassettes.kept_bytes), and marks the line cut when there were more.
func NewRecorder(secrets []string, keptBytes int64) *Recorder {
	return &Recorder{secrets: secrets, kept: keptBytes, tools: map[string]string{}}
}

// KeptBytes is how much of the next result under a handle the Recorder keeps: its kept
// bytes, or what is left of MaxKeptTotal when that is less.
func (r *Recorder) KeptBytes() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return max(min(r.kept, MaxKeptTotal-r.keptSum), 0)
}

// Play answers nothing: a Recorder only records.
func (*Recorder) Play(int, string, json.RawMessage) (toolcall.Answer, bool) {
	return toolcall.Answer{}, false
}

// Tools adds no name to the program's.
func (*Recorder) Tools() []string { return nil }

// Record keeps one call, its arguments redacted by its tool's definition.
func (r *Recorder) Record(c binding.TapedCall) {
	line := Call{Seq: c.Seq, Tool: c.Name, Arguments: redactArguments(c.Tool, c.Args), Outcome: "ok",
		Approval: string(c.Approval), Seconds: c.Seconds}
	if line.Approval == "" {
		line.Approval = "not_needed"
	}
	switch a := c.Answer; {
	case a.Kind != "":
		line.Outcome, line.Message = string(a.Kind), a.Message
	case a.Handle != nil:
		line.ResultRef = &ResultRef{Handle: *a.Handle, Kept: string(c.Kept), Cut: c.Cut}
	default:
		line.Result = a.Value
		if line.Result == nil {
			line.Result = json.RawMessage("null")
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keptSum += int64(len(c.Kept))
	r.calls = append(r.calls, line)
	if c.Tool != nil && c.Tool.Def != nil {
		if b, err := json.Marshal(c.Tool.Def); err == nil {
			r.tools[c.Name] = SHA256(b)
		}
	}
}

// Write writes the cassette of program: the header, the calls in order, and result (the
// execution's result document) last.
func (r *Recorder) Write(w io.Writer, program, agentVersion string, terms, result any) error {
	r.mu.Lock()
	calls := slices.Clone(r.calls)
	tools := maps.Clone(r.tools)
	r.mu.Unlock()
	slices.SortFunc(calls, func(a, b Call) int { return a.Seq - b.Seq })
	tb, err := json.Marshal(terms)
	if err != nil {
		return err
	}
	rb, err := json.Marshal(result)
	if err != nil {
		return err
	}
	lines := []any{Header{Cassette: Version, Program: program, ProgramSHA256: SHA256([]byte(program)),
		AgentVersion: agentVersion, Terms: tb, Tools: tools}}
	for _, c := range calls {
		lines = append(lines, c)
	}
	lines = append(lines, End{Result: rb})
	var buf bytes.Buffer
	for _, l := range lines {
		b, err := json.Marshal(l)
		if err != nil {
			return err
		}
		buf.Write(scrub(b, r.secrets))
		buf.WriteByte('\n')
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// redactArguments is args as a log line shows them (upstream.Tool.RedactArguments; t nil
// redacts by key names alone), as JSON, or as a string when they are not shown as JSON.
func redactArguments(t *upstream.Tool, args json.RawMessage) json.RawMessage {
	s := t.RedactArguments(args, maxArgumentBytes)
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}
