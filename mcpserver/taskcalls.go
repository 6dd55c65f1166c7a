package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/mcp-sandbox/mcp-sandbox/binding"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

// What a task lost with its server had done (docs/design.md §14.6). The process running a
// task notes its program's calls on the task each poll interval in which they changed, as its
// live result lists them (binding.CallsNoted: denied calls and who approved each included,
// with the ledger ids of those made or not yet ended); the result of a task lost with that
// process is that note, brought up to date with the ledger's records of its calls: a call in
// flight when it was noted that ended since reads as it ended, as does one not yet made when
// noted (its id is noted before its approval and admission) whose record shows it made since;
// the calls begun since are added, from their records (who approved them from the ledger's
// approvals). A task lost before its first note lists its records alone.

// noteCalls writes the task's calls so far, when they changed since the last note, and
// returns them; nil before the program's bindings exist.
func (h *handlers) noteCalls(ctx context.Context, t budget.Task, rt *runningTask) *binding.CallsNoted {
	x := rt.calls.Load()
	if x == nil {
		return nil
	}
	noted := x.NotedCalls()
	b, err := json.Marshal(noted)
	if err != nil || bytes.Equal(b, rt.noted) {
		return &noted
	}
	if err := h.opts.Ledger.SetTaskCalls(ctx, t.Tenant, t.ID, b); err != nil {
		h.log.Warn("a task's calls so far not noted", "task", t.ID, "err", err)
		return &noted
	}
	rt.noted = b
	return &noted
}

// lostCalls are the calls of a lost task's program, its tool_calls and tool_calls_omitted.
func (h *handlers) lostCalls(ctx context.Context, t budget.Task) ([]binding.CallSummary, int) {
	run := budget.RunRef{Tenant: t.Tenant, ID: t.Run}
	all, err := h.opts.Ledger.Calls(ctx, run)
	if err != nil {
		h.log.Warn("a lost task's calls not read", "task", t.ID, "err", err)
	}
	approvals, err := h.opts.Ledger.Approvals(ctx, run)
	if err != nil {
		h.log.Warn("a lost task's approvals not read", "task", t.ID, "err", err)
	}
	approvedBy := map[string]*string{}
	for _, a := range approvals {
		if a.ExecutionID == t.ExecutionID && a.CallID != "" && a.Status == budget.ApprovalAccepted {
			approvedBy[a.CallID] = binding.ApprovedBy(a.AnsweredBy)
		}
	}
	var noted binding.CallsNoted
	if t.Calls == nil || json.Unmarshal(t.Calls, &noted) != nil || len(noted.IDs) != len(noted.Calls) {
		noted = binding.CallsNoted{}
	}
	calls, omitted := noted.Calls, noted.Omitted
	// A listed call's record: of one made when noted, or of one not yet made then (waiting for
	// its approval or a slot, or being admitted), which its record, once spent, may show made.
	listed, spent := map[string]int{}, 0
	for i, id := range noted.IDs {
		if id != "" {
			listed[id] = i
		}
		if noted.Spent(i) {
			spent++
		}
	}
	// The made calls the note left out as older than its last ShownCalls come first among the
	// records; with no note, every record is listed (refusals the ledger recorded included).
	unlisted := noted.Made - spent
	seq := 0
	if len(calls) > 0 {
		seq = calls[len(calls)-1].Seq
	}
	for _, c := range all {
		if c.ExecutionID != t.ExecutionID || (t.Calls != nil && !c.Spent) {
			continue
		}
		if i, ok := listed[c.ID]; ok {
			// In flight when noted, or made since: as its record ended, unknown if it did not.
			if calls[i].Outcome == binding.CallUnknown || noted.OpenAt(i) {
				ended := calledAs(calls[i].Seq, c)
				calls[i].Outcome, calls[i].Kind = ended.Outcome, ended.Kind
				if calls[i].ApprovedBy == nil {
					calls[i].ApprovedBy = approvedBy[c.ID] // approved after the note
				}
			}
			continue
		}
		if unlisted > 0 {
			unlisted--
			continue
		}
		seq++
		s := calledAs(seq, c)
		s.ApprovedBy = approvedBy[c.ID]
		calls = append(calls, s)
	}
	if n := len(calls) - binding.ShownCalls; n > 0 {
		calls, omitted = calls[n:], omitted+n
	}
	return calls, omitted
}
