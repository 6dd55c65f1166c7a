package binding

import (
	"slices"
	"strings"
	"sync"

	"github.com/mcp-sandbox/mcp-sandbox/approval"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
)

// The outcomes of a call in a result's tool_calls (docs/design.md §14.5).
const (
	CallOK      = "ok"      // answered with a value
	CallError   = "error"   // answered with a failure of Kind
	CallDenied  = "denied"  // refused by the policy, an argument rule or the person
	CallUnknown = "unknown" // made, and how it ended is not known: cut off mid-call, or withheld
)

// Who approved a call, in a result's tool_calls; nil when nobody had to.
const (
	ApprovedByPerson   = "person"
	ApprovedByOperator = "operator"
	ApprovedByPlan     = "plan" // a rehearsed plan a person or operator approved at once covered it
)

// ShownCalls bounds the calls a result lists: the last ShownCalls, with the count of the
// earlier ones (ToolCallsOmitted).
const ShownCalls = 50

// CallSummary is one call a program made, as its result's tool_calls list it: in order, how
// it ended, and who approved it when someone had to. Built-ins (list_tools, get_tool_info,
// read_tool_output, budget.remaining), which change nothing, are not listed.
type CallSummary struct {
	Seq     int          `json:"seq"`
	Tool    string       `json:"tool"`
	Outcome string       `json:"outcome"`
	Kind    failure.Kind `json:"kind,omitempty"`
	// ApprovedBy is ApprovedByPerson, ApprovedByOperator or ApprovedByPlan, or nil (JSON null).
	ApprovedBy *string `json:"approved_by"`
}

// callNote is one call of the log while it is walked: what it came to before its answer. Its
// fields are guarded by its log's mutex.
type callNote struct {
	log        *callLog
	seq        int
	tool       string
	decision   approval.Decision
	answeredBy string
	spent      bool   // admitted: tool_call_started was written, the upstream may have it
	id         string // the ledger's id of its record if admitted, known before (numbered)
	withheld   bool   // its answer withheld (finishFirst): it was made, its outcome unknown

	done    bool
	outcome string
	kind    failure.Kind
}

// approved notes the approval step's decision d, answered by by.
func (n *callNote) approved(d approval.Decision, by string) {
	n.log.mu.Lock()
	defer n.log.mu.Unlock()
	n.decision, n.answeredBy = d, by
}

// numbered notes id, the ledger's id its record takes if it is admitted ("" without a
// ledger): before its approval, slot and admission, so a note taken while it waits for them,
// or between admission and made, relates the call to the record it may yet have.
func (n *callNote) numbered(id string) {
	n.log.mu.Lock()
	defer n.log.mu.Unlock()
	n.id = id
}

// made marks the call admitted, on its way to its upstream, recorded in the ledger.
func (n *callNote) made() {
	n.log.mu.Lock()
	defer n.log.mu.Unlock()
	n.spent = true
	n.log.made++
}

// withholding marks the call's answer withheld (finishFirst): it was made, its outcome unknown.
func (n *callNote) withholding() {
	n.log.mu.Lock()
	defer n.log.mu.Unlock()
	n.withheld = true
}

// callLog is an execution's calls as its result lists them: the last ShownCalls, and how
// many came before. Safe for concurrent use.
type callLog struct {
	mu      sync.Mutex
	notes   []*callNote
	omitted int
	made    int // the calls admitted, listed or not
}

// builtinName reports whether name is a built-in a program calls (or a refused one:
// run_code), which the log leaves out.
func builtinName(name string) bool {
	switch name {
	case BuiltinListTools, BuiltinGetToolInfo, BuiltinReadToolOutput, BuiltinBudgetRemaining, "run_code":
		return true
	}
	return false
}

// begin notes a call as it starts: one cut off before it ends reads unknown once made. A
// built-in's note is kept out of the log.
func (l *callLog) begin(seq int, tool string) *callNote {
	n := &callNote{log: l, seq: seq, tool: tool}
	if builtinName(tool) {
		return n
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.notes = append(l.notes, n)
	if len(l.notes) > ShownCalls {
		l.notes = slices.Delete(l.notes, 0, 1)
		l.omitted++
	}
	return n
}

// end notes how the call ended: its answer a.
func (l *callLog) end(n *callNote, a toolcall.Answer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n.done, n.kind = true, a.Kind
	switch {
	case n.withheld:
		n.outcome = CallUnknown
	case a.Kind == "":
		n.outcome = CallOK
	case n.spent && (a.Kind == failure.Cancelled || a.Kind == failure.Timeout):
		n.outcome = CallUnknown // cut off after it went out: the upstream may have done it
	case a.Kind == failure.Denied:
		n.outcome = CallDenied
	default:
		n.outcome = CallError
	}
}

// played notes a call answered from a tape (a resumed program's journal): made in its first
// run, with the answer it had then.
func (l *callLog) played(seq int, tool string, a toolcall.Answer) {
	l.end(l.begin(seq, tool), a)
}

// ToolCalls returns the program's calls so far in order (the last ShownCalls), and how many
// came before them: a result's tool_calls and tool_calls_omitted. A call not yet ended reads
// unknown once it was made, and cancelled before.
func (x *Execution) ToolCalls() (calls []CallSummary, omitted int) {
	n := x.NotedCalls()
	return n.Calls, n.Omitted
}

// CallsNoted are a program's calls so far as ToolCalls lists them, with what relates them to
// the ledger's records of its calls, read at once: what a task keeps so that a program lost
// with its server reads as its result would have (mcpserver).
type CallsNoted struct {
	Calls   []CallSummary `json:"tool_calls"`
	Omitted int           `json:"tool_calls_omitted,omitempty"`
	// IDs are the ledger ids of the records of Calls (IDs[i] is Calls[i]'s): of a call
	// admitted, or of one not ended that may be admitted after the note; "" for another.
	IDs []string `json:"ids"`
	// Open[i] says Calls[i] had not ended when noted: a spent record of it says how it went
	// on (its listed outcome is how it would end now: unknown once admitted, cancelled before).
	Open []bool `json:"open,omitempty"`
	// Made counts the calls admitted, listed or not: the records of the program's calls that
	// were spent when noted.
	Made int `json:"made"`
}

// Spent reports whether Calls[i] had been admitted when noted: its record was spent.
func (n CallsNoted) Spent(i int) bool {
	if n.IDs[i] == "" {
		return false
	}
	return !n.OpenAt(i) || n.Calls[i].Outcome == CallUnknown
}

// OpenAt reports Open[i], false where Open is short (a note with none open).
func (n CallsNoted) OpenAt(i int) bool { return i < len(n.Open) && n.Open[i] }

// NotedCalls returns the program's calls so far (ToolCalls), with their ledger ids.
func (x *Execution) NotedCalls() CallsNoted {
	l := &x.calls
	l.mu.Lock()
	defer l.mu.Unlock()
	notes := slices.SortedStableFunc(slices.Values(l.notes), func(a, b *callNote) int { return a.seq - b.seq })
	out := CallsNoted{Omitted: l.omitted, Made: l.made, Calls: make([]CallSummary, 0, len(notes)), IDs: make([]string, 0, len(notes))}
	open := make([]bool, 0, len(notes))
	for _, n := range notes {
		c := CallSummary{Seq: n.seq, Tool: n.tool, Outcome: n.outcome, Kind: n.kind}
		id := n.id
		switch {
		case !n.done && n.spent:
			c.Outcome = CallUnknown
		case !n.done:
			c.Outcome, c.Kind = CallError, failure.Cancelled
		case !n.spent:
			id = "" // refused at admission or before: it has no spent record
		}
		if n.decision == approval.Accepted {
			c.ApprovedBy = ApprovedBy(n.answeredBy)
		}
		out.Calls, out.IDs, open = append(out.Calls, c), append(out.IDs, id), append(open, !n.done)
	}
	if slices.Contains(open, true) {
		out.Open = open
	}
	return out
}

// ApprovedBy is who approved a call, as tool_calls says it, from who answered its approval
// (the approval step's answeredBy, the ledger's ApprovalRecord.AnsweredBy).
func ApprovedBy(answeredBy string) *string {
	by := ApprovedByPerson
	switch {
	case strings.HasPrefix(answeredBy, approval.ByPlan):
		by = ApprovedByPlan
	case strings.HasPrefix(answeredBy, "operator"):
		by = ApprovedByOperator
	}
	return &by
}
