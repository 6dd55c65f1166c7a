package ledgertest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

// contractTasks: a task is kept for its tenant only (another tenant's lookup finds nothing),
// updated while it goes on, and never again once terminal; listed newest first; dropped with
// its retention.
func contractTasks(t *testing.T, l budget.Ledger) {
	ctx := context.Background()
	created := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	task := budget.Task{ID: budget.NewTaskID(), Tenant: "alpha", Agent: "a", Run: "session:1", Status: budget.TaskWorking,
		CreatedAt: created, TTL: time.Hour, PollInterval: time.Second}
	if err := l.SaveTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	got, err := l.Task(ctx, "alpha", task.ID)
	if err != nil || got.Status != budget.TaskWorking || got.Run != "session:1" || got.TTL != time.Hour || got.PollInterval != time.Second ||
		!got.CreatedAt.Equal(created) || got.Owner == "" || got.Result != nil {
		t.Fatalf("Task = %+v, %v", got, err)
	}
	if _, err := l.Task(ctx, "beta", task.ID); !errors.Is(err, budget.ErrNotFound) {
		t.Errorf("another tenant's lookup of the task: %v, want ErrNotFound", err)
	}
	if _, err := l.UpdateTask(ctx, "beta", task.ID, budget.TaskCancelled, "", nil); !errors.Is(err, budget.ErrNotFound) {
		t.Errorf("another tenant's update of the task: %v, want ErrNotFound", err)
	}
	if got, err := l.UpdateTask(ctx, "alpha", task.ID, budget.TaskWorking, "running for 3s", nil); err != nil || got.Message != "running for 3s" {
		t.Errorf("UpdateTask(working) = %+v, %v", got, err)
	}
	calls := json.RawMessage(`{"tool_calls":[]}`)
	if err := l.SetTaskCalls(ctx, "alpha", task.ID, calls); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Task(ctx, "alpha", task.ID); err != nil || string(got.Calls) != string(calls) {
		t.Errorf("a task's calls so far: %+v, %v", got, err)
	}
	result := json.RawMessage(`{"content":[]}`)
	if got, err := l.UpdateTask(ctx, "alpha", task.ID, budget.TaskCompleted, "", result); err != nil || got.Status != budget.TaskCompleted ||
		string(got.Result) != string(result) || got.UpdatedAt.Before(got.CreatedAt) {
		t.Errorf("UpdateTask(completed) = %+v, %v", got, err)
	}
	if got, err := l.UpdateTask(ctx, "alpha", task.ID, budget.TaskCancelled, "", nil); !errors.Is(err, budget.ErrAlreadyFinished) || got.Status != budget.TaskCompleted {
		t.Errorf("a terminal task changed again: %+v, %v", got, err)
	}
	if err := l.SetTaskCalls(ctx, "alpha", task.ID, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Task(ctx, "alpha", task.ID); err != nil || string(got.Calls) != string(calls) {
		t.Errorf("a terminal task's calls changed: %+v, %v", got, err)
	}
	newer := budget.Task{ID: budget.NewTaskID(), Tenant: "alpha", Agent: "a", Run: "session:2", Status: budget.TaskWorking, CreatedAt: time.Now()}
	other := budget.Task{ID: budget.NewTaskID(), Tenant: "beta", Agent: "a", Run: "session:3", Status: budget.TaskWorking, CreatedAt: time.Now()}
	for _, tk := range []budget.Task{newer, other} {
		if err := l.SaveTask(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	// Cancelled with no result (by another process): its owner gives it its result, once.
	if _, err := l.UpdateTask(ctx, "alpha", newer.ID, budget.TaskCancelled, "cancelled", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := l.UpdateTask(ctx, "alpha", newer.ID, budget.TaskCompleted, "", result); !errors.Is(err, budget.ErrAlreadyFinished) || got.Result != nil {
		t.Errorf("a cancelled task completed: %+v, %v", got, err)
	}
	if got, err := l.UpdateTask(ctx, "alpha", newer.ID, budget.TaskCancelled, "cancelled: killed", result); err != nil ||
		got.Status != budget.TaskCancelled || string(got.Result) != string(result) || got.Message != "cancelled: killed" {
		t.Errorf("the cancelled task's result from its owner: %+v, %v", got, err)
	}
	if got, err := l.UpdateTask(ctx, "alpha", newer.ID, budget.TaskCancelled, "again", json.RawMessage(`{}`)); !errors.Is(err, budget.ErrAlreadyFinished) ||
		string(got.Result) != string(result) {
		t.Errorf("a cancelled task's result changed again: %+v, %v", got, err)
	}
	list, err := l.ListTasks(ctx, "alpha", "a", 10)
	if err != nil || len(list) != 2 || list[0].ID != newer.ID || list[1].ID != task.ID {
		t.Errorf("ListTasks = %+v, %v; want alpha's two, newest first", list, err)
	}
	if n, err := l.DropTasksBefore(ctx, created.Add(time.Second)); err != nil || n != 1 {
		t.Errorf("DropTasksBefore = %d, %v; want the older one", n, err)
	}
	if _, err := l.Task(ctx, "alpha", task.ID); !errors.Is(err, budget.ErrNotFound) {
		t.Errorf("a dropped task: %v", err)
	}
}

// contractTaskCrash: a task whose owner is gone while it works is failed by a survivor's
// Recover (TaskLost), never left working; the survivor's own task goes on; the execution it
// ran as is kept.
func contractTaskCrash(t *testing.T, dead budget.Ledger, reopen func(t *testing.T, l budget.Ledger) budget.Ledger) {
	ctx := context.Background()
	lost := budget.Task{ID: budget.NewTaskID(), Tenant: "t", Agent: "a", Run: "r", Status: budget.TaskWorking, CreatedAt: time.Now()}
	if err := dead.SaveTask(ctx, lost); err != nil {
		t.Fatal(err)
	}
	if err := dead.SetTaskExecution(ctx, "t", lost.ID, "x_1"); err != nil {
		t.Fatal(err)
	}
	if err := dead.SetTaskExecution(ctx, "other", lost.ID, "x_1"); !errors.Is(err, budget.ErrNotFound) {
		t.Errorf("another tenant set the task's execution: %v", err)
	}
	survivor := reopen(t, dead)
	live := budget.Task{ID: budget.NewTaskID(), Tenant: "t", Agent: "a", Run: "r", Status: budget.TaskWorking, CreatedAt: time.Now()}
	if err := survivor.SaveTask(ctx, live); err != nil {
		t.Fatal(err)
	}
	if err := dead.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := survivor.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := survivor.Task(ctx, "t", lost.ID); err != nil || got.Status != budget.TaskFailed || got.Message != budget.TaskLost || got.ExecutionID != "x_1" {
		t.Errorf("the dead owner's task after recovery: %+v, %v; want failed, its execution kept", got, err)
	}
	if got, err := survivor.Task(ctx, "t", live.ID); err != nil || got.Status != budget.TaskWorking {
		t.Errorf("the survivor's own task after recovery: %+v, %v; want still working", got, err)
	}
}
