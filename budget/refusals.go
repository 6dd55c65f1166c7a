package budget

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
)

// RecordedRefusals is how many refusals of one kind, of one tool, an execution's Meter
// records one by one (Meter.Admit's argument_too_large and budget_exceeded, AskApproval's
// unasked); it counts the rest and records them as one summary at the execution's end
// (Meter.End), so a program looping on a refused call cannot grow the ledger without limit.
const RecordedRefusals = 8

// refusalKey groups the refusals one summary stands for.
type refusalKey struct {
	approval bool   // an unasked approval (the approvals table), not a refused call
	tool     string // the model-facing name
	kind     string // the refusal's kind; for an approval, the reason it was needed
}

// refusalTally counts the refusals of one key.
type refusalTally struct {
	recorded int64 // written one by one
	more     int64 // counted and not yet written: the summary's Times
	last     string
	maxArgs  int64
}

// countRefusal counts one refusal of k and reports whether it is to be recorded one by one:
// always for a direct Meter (no execution, so no end to summarise at) and after End, else
// for the first RecordedRefusals of k. message and argBytes are the refusal's, for the
// summary. Called with mu held.
func (m *Meter) countRefusal(k refusalKey, message string, argBytes int64) bool {
	if m.exec == "" || m.ended {
		return true
	}
	t := m.tally(k)
	if t.recorded < RecordedRefusals {
		t.recorded++
		return true
	}
	t.more++
	t.last = message
	t.maxArgs = max(t.maxArgs, argBytes)
	return false
}

// unrecorded moves one refusal of k that countRefusal sent to be recorded, and whose record
// failed, to the summary's count, so the ledger's sum stays exact while it can write at all.
// Called with mu not held.
func (m *Meter) unrecorded(k refusalKey, message string, argBytes int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.exec == "" || m.ended {
		return // recorded one by one, nothing to summarise: the error is the caller's to report
	}
	t := m.tally(k)
	t.recorded--
	t.more++
	t.last = message
	t.maxArgs = max(t.maxArgs, argBytes)
}

// countRecorded counts one refusal of k the ledger recorded itself (StartCall's, when the
// Run was spent and this meter had not yet seen it). Called with mu held.
func (m *Meter) countRecorded(k refusalKey) {
	if m.exec == "" || m.ended {
		return
	}
	m.tally(k).recorded++
}

// tally returns k's tally, made if need be. Called with mu held.
func (m *Meter) tally(k refusalKey) *refusalTally {
	t := m.refusals[k]
	if t == nil {
		if m.refusals == nil {
			m.refusals = map[refusalKey]*refusalTally{}
		}
		t = &refusalTally{}
		m.refusals[k] = t
	}
	return t
}

// recordSummaries writes one summary per key with refusals counted and not yet written, and
// forgets each once it is written. End calls it with mu not held, after setting ended, so no refusal is counted
// afterwards.
func (m *Meter) recordSummaries(ctx context.Context) error {
	m.mu.Lock()
	type pending struct {
		k refusalKey
		t refusalTally
	}
	var todo []pending
	for k, t := range m.refusals {
		if t.more > 0 {
			todo = append(todo, pending{k, *t})
		}
	}
	m.mu.Unlock()
	slices.SortFunc(todo, func(a, b pending) int {
		if a.k.approval != b.k.approval {
			if a.k.approval {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(a.k.tool, b.k.tool), cmp.Compare(a.k.kind, b.k.kind))
	})
	var errs []error
	for _, p := range todo {
		var err error
		if p.k.approval {
			err = m.ledger.AskApproval(ctx, ApprovalAsk{ID: NewID("a_"), Run: m.run, ExecutionID: m.exec, Tool: p.k.tool,
				Reason: p.k.kind, Status: ApprovalUnasked, Times: p.t.more})
		} else {
			err = m.ledger.RefuseCall(ctx, Refusal{
				CallStart: CallStart{ID: NewID("c_"), Run: m.run, ExecutionID: m.exec, Tool: p.k.tool, ArgumentBytes: p.t.maxArgs},
				Kind:      p.k.kind,
				Message: fmt.Sprintf("%d more calls of %s were refused (%s) after the first %d, each recorded on its own; the last said: %s",
					p.t.more, p.k.tool, p.k.kind, p.t.recorded, p.t.last),
				Times: p.t.more})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("budget: the summary of %d refusals of %s (%s) was not recorded: %w", p.t.more, p.k.tool, p.k.kind, err))
			continue
		}
		// Forgotten only once written: a summary that failed is still counted in memory
		// (and in End's error), not lost to a later look.
		m.mu.Lock()
		delete(m.refusals, p.k)
		m.mu.Unlock()
	}
	return errors.Join(errs...)
}
