package mcpserver

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-sandbox/mcp-sandbox/binding"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/budget/sqlite"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// TestLostTaskCalls: a lost task's tool_calls are its server's last note of them (a call the
// policy denied and who approved each included, which the ledger's call records lack),
// brought up to date with the records: a call in flight when noted that ended since reads as
// it ended, and one made since is added, who approved it read from the ledger's approvals.
// Without a note, the records alone; another execution's calls are never listed.
func TestLostTaskCalls(t *testing.T) {
	ctx := t.Context()
	led, run, must := lostTaskLedger(t, "x_1", "x_2")
	call := func(id, execution, tool string) {
		_, err := led.StartCall(ctx, budget.CallStart{ID: id, Run: run, ExecutionID: execution, Tool: tool}, budget.Limits{})
		must(err)
	}
	call("c1", "x_1", "s__a")
	must(led.FinishCall(ctx, budget.CallFinish{ID: "c1", Status: budget.Succeeded}))
	call("c9", "x_2", "s__other")
	call("c2", "x_1", "s__b")
	must(led.FinishCall(ctx, budget.CallFinish{ID: "c2", Status: budget.Failed, Kind: string(failure.UpstreamError)}))
	must(led.AskApproval(ctx, budget.ApprovalAsk{ID: "a3", Run: run, ExecutionID: "x_1", CallID: "c3", Tool: "s__c", Status: budget.ApprovalPending}))
	must(led.DecideApproval(ctx, budget.ApprovalDecision{ID: "a3", Status: budget.ApprovalAccepted, AnsweredBy: "operator"}))
	call("c3", "x_1", "s__c") // in flight when the server died

	person := binding.ApprovedByPerson
	note, _ := json.Marshal(binding.CallsNoted{Made: 2, IDs: []string{"c1", "", "c2"}, Calls: []binding.CallSummary{
		{Seq: 1, Tool: "s__a", Outcome: binding.CallOK},
		{Seq: 2, Tool: "s__denied", Outcome: binding.CallDenied, Kind: failure.Denied},
		{Seq: 3, Tool: "s__b", Outcome: binding.CallUnknown, ApprovedBy: &person},
	}})
	h := &handlers{agent: Agent{Tenant: "t"}, opts: Options{Ledger: led}, log: discard()}
	lost := budget.Task{Tenant: "t", Run: run.ID, ExecutionID: "x_1", Calls: note}
	operator := binding.ApprovedByOperator
	want := []binding.CallSummary{
		{Seq: 1, Tool: "s__a", Outcome: binding.CallOK},
		{Seq: 2, Tool: "s__denied", Outcome: binding.CallDenied, Kind: failure.Denied},
		{Seq: 3, Tool: "s__b", Outcome: binding.CallError, Kind: failure.UpstreamError, ApprovedBy: &person},
		{Seq: 4, Tool: "s__c", Outcome: binding.CallUnknown, ApprovedBy: &operator},
	}
	if got, omitted := h.lostCalls(ctx, lost); omitted != 0 || !cmp.Equal(got, want) {
		t.Errorf("the lost task's calls (omitted %d), -want +got:\n%s", omitted, cmp.Diff(want, got))
	}

	lost.Calls = nil
	want = []binding.CallSummary{
		{Seq: 1, Tool: "s__a", Outcome: binding.CallOK},
		{Seq: 2, Tool: "s__b", Outcome: binding.CallError, Kind: failure.UpstreamError},
		{Seq: 3, Tool: "s__c", Outcome: binding.CallUnknown, ApprovedBy: &operator},
	}
	if got, omitted := h.lostCalls(ctx, lost); omitted != 0 || !cmp.Equal(got, want) {
		t.Errorf("the calls of a task lost before its first note (omitted %d), -want +got:\n%s", omitted, cmp.Diff(want, got))
	}

	// Cancelled from another process, whose running process never wrote the result: once
	// cancelledResultWait has passed since the cancel, every read (tasks/result, and the
	// extension's tasks/get) has the result the ledger's records make; before, none yet.
	for _, since := range []time.Duration{0, cancelledResultWait + time.Second} {
		at := time.Now().Add(-since)
		c := budget.Task{ID: budget.NewTaskID(), Tenant: "t", Run: run.ID, Status: budget.TaskCancelled, Message: "cancelled",
			CreatedAt: at, UpdatedAt: at, PollInterval: time.Second}
		must(led.SaveTask(ctx, c))
		must(led.SetTaskExecution(ctx, "t", c.ID, "x_1"))
		got, err := h.task(ctx, c.ID)
		must(err)
		var res struct {
			StructuredContent ModelResult `json:"structuredContent"`
		}
		switch {
		case since == 0 && got.Result != nil:
			t.Errorf("a task cancelled just now has a result before its running process wrote one: %s", got.Result)
		case since > 0 && (json.Unmarshal(got.Result, &res) != nil || res.StructuredContent.Failure == nil ||
			res.StructuredContent.Failure.Kind != failure.Cancelled || len(res.StructuredContent.ToolCalls) != 3):
			t.Errorf("a task cancelled %v ago with no result reads %s; want the ledger's cancelled result with its three calls", since, got.Result)
		}
	}
}

// TestLostTaskCallsNotedBeforeAdmission: a call not yet made when its task's calls were noted
// (waiting for its approval or a slot, or being admitted) is listed once, where the note has
// it: as its record ended when the record shows it made since (unknown if it never ended,
// approved by whom the ledger says), cancelled without one; and it is not taken for one of the
// made calls the note left out as older.
func TestLostTaskCallsNotedBeforeAdmission(t *testing.T) {
	ctx := t.Context()
	led, run, must := lostTaskLedger(t, "x_1")
	call := func(id, tool string) {
		_, err := led.StartCall(ctx, budget.CallStart{ID: id, Run: run, ExecutionID: "x_1", Tool: tool}, budget.Limits{})
		must(err)
	}
	call("c0", "s__old") // older than the note's last ShownCalls
	must(led.FinishCall(ctx, budget.CallFinish{ID: "c0", Status: budget.Succeeded}))
	call("c1", "s__a")
	must(led.FinishCall(ctx, budget.CallFinish{ID: "c1", Status: budget.Succeeded}))
	// Noted waiting for its approval; approved, made and ended since.
	must(led.AskApproval(ctx, budget.ApprovalAsk{ID: "a2", Run: run, ExecutionID: "x_1", CallID: "c2", Tool: "s__b", Status: budget.ApprovalPending}))
	must(led.DecideApproval(ctx, budget.ApprovalDecision{ID: "a2", Status: budget.ApprovalAccepted, AnsweredBy: "operator"}))
	call("c2", "s__b")
	must(led.FinishCall(ctx, budget.CallFinish{ID: "c2", Status: budget.Succeeded}))
	call("c3", "s__c") // noted being admitted; in flight when the server died

	cancelled := func(seq int, tool string) binding.CallSummary {
		return binding.CallSummary{Seq: seq, Tool: tool, Outcome: binding.CallError, Kind: failure.Cancelled}
	}
	note, _ := json.Marshal(binding.CallsNoted{Omitted: 1, Made: 2, IDs: []string{"c1", "c2", "c3", "c4"},
		Open: []bool{false, true, true, true}, Calls: []binding.CallSummary{
			{Seq: 2, Tool: "s__a", Outcome: binding.CallOK},
			cancelled(3, "s__b"), cancelled(4, "s__c"), cancelled(5, "s__d"), // c4: never made
		}})
	h := &handlers{agent: Agent{Tenant: "t"}, opts: Options{Ledger: led}, log: discard()}
	lost := budget.Task{Tenant: "t", Run: run.ID, ExecutionID: "x_1", Calls: note}
	operator := binding.ApprovedByOperator
	want := []binding.CallSummary{
		{Seq: 2, Tool: "s__a", Outcome: binding.CallOK},
		{Seq: 3, Tool: "s__b", Outcome: binding.CallOK, ApprovedBy: &operator},
		{Seq: 4, Tool: "s__c", Outcome: binding.CallUnknown},
		cancelled(5, "s__d"),
	}
	if got, omitted := h.lostCalls(ctx, lost); omitted != 1 || !cmp.Equal(got, want) {
		t.Errorf("the lost task's calls (omitted %d, want 1), -want +got:\n%s", omitted, cmp.Diff(want, got))
	}
}

// lostTaskLedger is a SQLite ledger, closed when the test ends, holding one Run of tenant t
// with executions started in it; must fails the test on an error.
func lostTaskLedger(t *testing.T, executions ...string) (*sqlite.Ledger, budget.RunRef, func(error)) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	led, err := sqlite.Open(t.Context(), t.TempDir(), nil)
	must(err)
	t.Cleanup(func() { led.Close() })
	run := budget.RunRef{Tenant: "t", ID: "session:1"}
	must(led.StartRun(t.Context(), run))
	for _, x := range executions {
		_, err := led.StartExecution(t.Context(), run, x, "")
		must(err)
	}
	return led, run, must
}
