package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/approval"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

// A question inside a task of the tasks extension (2026-07-28, SEP-2663; docs/design.md
// §14.7). The program's call waits in the approval Room as any call does, its question kept as
// a pause in the ledger under the task (taskPauseKey); the task is input_required meanwhile,
// and tasks/get shows the question as the task's input request, keyed by the question's id
// (the approval id the operator route lists): {"<id>": {"method": "elicitation/create",
// "params": {"mode": "form", "message", "requestedSchema"}}}, the same form the other paths
// ask with. The client answers by tasks/update {taskId, inputResponses: {"<id>": ElicitResult}};
// any process takes it and hands it to its Room (recorded as the pause's answer, the first from
// any path standing), and the process running the program sees it at once, or within its
// Room's poll. Both read the pause from the ledger, never from a process's memory.

// taskPauseKey is the key a task's questions are kept under as pauses in the ledger (their
// budget.Pause.Run, approval.Asking.Run), which tasks/get and tasks/update find them by.
func taskPauseKey(taskID string) string { return "task:" + taskID }

// inputRequests are a task's input requests, keyed by question id.
type inputRequests map[string]inputRequest

// inputRequest is one: a server-to-client request as the extension carries it.
type inputRequest struct {
	Method string            `json:"method"`
	Params *mcp.ElicitParams `json:"params"`
}

// taskUpdateParams are tasks/update's.
type taskUpdateParams struct {
	mcp.ParamsBase
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
}

// taskInput is the question task t's program waits on now, as its input request: none when
// it was answered meanwhile (the status catches up at once) or is no longer open.
func (h *handlers) taskInput(ctx context.Context, t budget.Task) (inputRequests, error) {
	open, err := h.room.Open(ctx, t.Tenant, taskPauseKey(t.ID))
	if err != nil {
		return nil, h.taskStoreError(err)
	}
	in := inputRequests{}
	for _, q := range open {
		in[q.ID] = inputRequest{Method: "elicitation/create",
			Params: &mcp.ElicitParams{Mode: "form", Message: q.Message(), RequestedSchema: approvalSchema}}
	}
	return in, nil
}

// updateTask answers tasks/update: each input response answers the task's open question of
// its key, through the Room; nothing is answered unless every key names a question of this
// task that is still open and every response is an answer.
func (h *handlers) updateTask(ctx context.Context, _ *mcp.ServerSession, p *taskUpdateParams) (*doneV2, error) {
	t, err := h.task(ctx, p.TaskID)
	if err != nil {
		return nil, err
	}
	if len(p.InputResponses) == 0 {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "tasks/update carries no inputResponses: nothing to answer"}
	}
	answers := map[string]approval.Answer{}
	for id, raw := range p.InputResponses {
		if err := h.openQuestion(ctx, t, id); err != nil {
			return nil, err
		}
		var res struct {
			Action string   `json:"action"`
			Meta   mcp.Meta `json:"_meta"`
		}
		if json.Unmarshal(raw, &res) != nil || !(approval.Answer{Action: res.Action}).Valid() {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
				Message: fmt.Sprintf("the response to input request %q is not an elicitation result: its action must be accept, decline or cancel", id)}
		}
		answers[id] = approval.Answer{Action: res.Action, By: answeredBy(res.Meta)}
	}
	for id, ans := range answers {
		if q, err := h.room.Answer(ctx, id, ans); errors.Is(err, budget.ErrAlreadyFinished) {
			return nil, answeredAlready(t.ID, q)
		} else if err != nil {
			h.log.Error("task input not recorded", "task", t.ID, "question", id, "err", err)
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the answer to input request %q could not be recorded; the question stays open", id)}
		}
		h.log.Info("task input answered", "task", t.ID, "question", id, "answer", ans.Action)
	}
	return &doneV2{ResultType: "complete"}, nil
}

// openQuestion checks that id is a question of task t still open: one of another task, or
// tenant, reads as unknown.
func (h *handlers) openQuestion(ctx context.Context, t budget.Task, id string) error {
	q, err := h.room.Kept(ctx, id)
	switch {
	case errors.Is(err, budget.ErrNotFound) || (err == nil && (q.Tenant != t.Tenant || q.Run != taskPauseKey(t.ID))):
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("task %s has no input request %q: it never asked it, or it is no longer kept", t.ID, id)}
	case err != nil:
		return h.taskStoreError(err)
	case q.Status != budget.ApprovalPending:
		return answeredAlready(t.ID, q)
	case !time.Now().Before(q.Expires):
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("input request %q of task %s closed at %s unanswered, and the call was refused; an answer now changes nothing",
				id, t.ID, q.Expires.UTC().Format(time.RFC3339))}
	}
	return nil
}

// answeredAlready is the error for an answer to question q, answered before on any path.
func answeredAlready(task string, q budget.Pause) error {
	by := ""
	if q.AnsweredBy != "" {
		by = " by " + q.AnsweredBy
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
		Message: fmt.Sprintf("input request %q of task %s was answered already (%s%s); the first answer from any path stands", q.ID, task, q.Status, by)}
}
