package budget

import (
	"context"
	"encoding/json"
	"time"
)

// TaskStatus is where a task stands: the MCP task statuses.
type TaskStatus string

// The statuses of a task. Working and InputRequired go on; the others are terminal, and a
// terminal task never changes again.
const (
	TaskWorking       TaskStatus = "working"
	TaskInputRequired TaskStatus = "input_required"
	TaskCompleted     TaskStatus = "completed"
	TaskFailed        TaskStatus = "failed"
	TaskCancelled     TaskStatus = "cancelled"
)

// Terminal reports whether s ends a task.
func (s TaskStatus) Terminal() bool {
	return s == TaskCompleted || s == TaskFailed || s == TaskCancelled
}

// Task is a run_code call a client asked to run as an MCP task, kept in the ledger so that any
// process on it answers for it and a restart loses none (docs/design.md §14.6). It belongs to
// its tenant: another tenant's lookup of its id finds nothing.
type Task struct {
	// ID is opaque and unguessable (NewTaskID).
	ID     string
	Tenant string
	Agent  string
	// Run is the Run the program runs in; ExecutionID its execution once it started ("" before):
	// the calls it made are that execution's (Ledger.Calls).
	Run         string
	ExecutionID string
	Status      TaskStatus
	// Message says how it goes, for tasks/get's statusMessage.
	Message   string
	CreatedAt time.Time
	UpdatedAt time.Time
	// TTL is how long it is kept from its creation; PollInterval what a client is told to
	// wait between polls.
	TTL          time.Duration
	PollInterval time.Duration
	// Result is the tools/call result, JSON, once it has ended (nil before).
	Result json.RawMessage
	// Calls are the program's calls as the process running it last noted them while it
	// worked (SetTaskCalls; nil before): what the result of a task lost with that process
	// lists (mcpserver's JSON, held as it is).
	Calls json.RawMessage
	// Owner is the ledger owner running it (set by SaveTask): a task whose owner is gone
	// while it works is failed by Recover (with TaskLost), never run again.
	Owner string
}

// TaskLost is the message of a task Recover failed: its owner stopped while it ran.
const TaskLost = "the server running the program stopped before it ended; it was not run again"

// NewTaskID returns a task id: 128 random bits, so ids cannot be guessed across tenants.
func NewTaskID() string { return NewID("t_") }

// Tasks keep MCP tasks: a part of Ledger. Safe for concurrent use, and by several processes
// on one store.
type Tasks interface {
	// SaveTask records t, owned by this ledger (t.Owner is ignored).
	SaveTask(ctx context.Context, t Task) error
	// Task returns tenant's task id; ErrNotFound for one it does not have (another tenant's
	// included).
	Task(ctx context.Context, tenant, id string) (Task, error)
	// ListTasks returns tenant's tasks of agent, newest first, at most limit.
	ListTasks(ctx context.Context, tenant, agent string, limit int) ([]Task, error)
	// UpdateTask sets a task's status, message and (when not nil) result, unless it is
	// terminal already: then ErrAlreadyFinished, with the task as it stands. ErrNotFound for
	// an unknown one. One terminal task takes its result still: one cancelled with none (a
	// tasks/cancel another process recorded) is given its result, with status cancelled, by
	// the process that ran it (its owner), once.
	UpdateTask(ctx context.Context, tenant, id string, status TaskStatus, message string, result json.RawMessage) (Task, error)
	// SetTaskCalls records a working task's calls so far (Task.Calls); a terminal task's
	// stand.
	SetTaskCalls(ctx context.Context, tenant, id string, calls json.RawMessage) error
	// SetTaskExecution records the execution a task's program runs as.
	SetTaskExecution(ctx context.Context, tenant, id, executionID string) error
	// DropTasksBefore forgets the tasks created before t: the retention period's end.
	DropTasksBefore(ctx context.Context, t time.Time) (int, error)
}
