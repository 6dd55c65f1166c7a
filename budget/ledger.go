package budget

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
)

// RunRef names a Run: the MCP session id, or the id a host names in _meta (mcp-sandbox/run),
// within a tenant. The same ID under two tenants is two Runs.
type RunRef struct {
	Tenant string
	ID     string
}

// CallStatus is where a recorded tool call stands.
type CallStatus string

// The statuses of a recorded call. Started is the tool_call_started record; the others are
// tool_call_finished, except Unknown, which Recover gives a started call that never finished.
const (
	Started   CallStatus = "started"
	Succeeded CallStatus = "succeeded"
	Failed    CallStatus = "failed"
	Refused   CallStatus = "refused"
	Aborted   CallStatus = "aborted"
	Unknown   CallStatus = "unknown"
)

// Finishing reports whether s may end a started call.
func (s CallStatus) Finishing() bool {
	switch s {
	case Succeeded, Failed, Refused, Aborted:
		return true
	}
	return false
}

// CallStart is a tool_call_started record.
type CallStart struct {
	ID            string // unique across the ledger; NewID makes one
	Run           RunRef
	ExecutionID   string // "" for a direct call from the MCP host
	Tool          string
	ArgumentBytes int64
}

// CallFinish is a tool_call_finished record.
type CallFinish struct {
	ID     string
	Status CallStatus // Succeeded, Failed, Refused or Aborted
	// Usage of the call; Calls is ignored (the call was counted when it started).
	Usage       Usage
	Attachments json.RawMessage // JSON array of attachments, or nil
	Kind        string          // the ToolError or failure kind, when not Succeeded
	Message     string
}

// Refusal is the record of calls refused before they were started: never spent.
type Refusal struct {
	// CallStart is the refused call. For a summary (Times > 1) ID is the summary's own,
	// ArgumentBytes the largest among the calls it stands for.
	CallStart
	Kind    string // the ToolError kind: argument_too_large, budget_exceeded
	Message string
	// Times is how many refused calls the record stands for: 1 (0 means 1), or more for the
	// summary a Meter writes at its execution's end of the refusals it counted without
	// recording them one by one (RecordedRefusals).
	Times int64
}

// CallRecord is a call as the ledger holds it.
type CallRecord struct {
	CallStart
	Status      CallStatus
	Spent       bool // counted as a call: its tool_call_started was written
	StartedAt   time.Time
	FinishedAt  time.Time // zero while Started
	Usage       Usage     // Calls is 1 when Spent
	Attachments json.RawMessage
	Kind        string
	Message     string
	// Times is how many calls the record stands for: 1, or more for a summary of refusals
	// (Refusal.Times). The refused calls of a Run number the sum of Times over its Refused
	// records.
	Times int64
}

// ExecutionEnd is the end record of one execution.
type ExecutionEnd struct {
	ID          string
	Status      string // "completed", or the failure kind
	Attachments json.RawMessage
	// Context is the execution's context economy: what its program received from bindings,
	// what came back to the model, and the difference. The ledger sums it per Run
	// (RunContext).
	Context telemetry.Context
	// Network is what its egress proxy decided (egress.Stats.Record: JSON, which the ledger
	// holds as it is, docs/design.md §18); nil without network rules.
	Network json.RawMessage
	// Usage is the execution's own usage as its Meter counted it: its spent calls and every
	// byte they and its charges brought, what Execution reports once it has ended. While it
	// runs, Execution counts its calls as they are recorded; SQLite keeps a running
	// execution's record free of per-call updates and sums its calls when read
	// (docs/design.md §19.3).
	Usage Usage
}

// ApprovalStatus is where a call's approval by a person stands.
type ApprovalStatus string

// The statuses of a recorded approval. Pending is the question put and not yet answered; the
// others end it, except Unasked, recorded decided at once, and Unknown, which Recover gives a
// pending approval whose owner is gone (the call was never made, and never will be).
const (
	ApprovalPending   ApprovalStatus = "pending"
	ApprovalAccepted  ApprovalStatus = "accepted"
	ApprovalDeclined  ApprovalStatus = "declined"
	ApprovalCancelled ApprovalStatus = "cancelled" // the person dismissed the question
	ApprovalTimedOut  ApprovalStatus = "timed_out" // nobody answered before the deadline
	ApprovalFailed    ApprovalStatus = "failed"    // the host could not put the question, or answer it
	ApprovalUnasked   ApprovalStatus = "unasked"   // refused: this host cannot ask a person
	ApprovalUnknown   ApprovalStatus = "unknown"
)

// Deciding reports whether s may end a pending approval.
func (s ApprovalStatus) Deciding() bool {
	switch s {
	case ApprovalAccepted, ApprovalDeclined, ApprovalCancelled, ApprovalTimedOut, ApprovalFailed:
		return true
	}
	return false
}

// ApprovalAsk records a call that needs a person's approval, before anyone answers.
type ApprovalAsk struct {
	ID          string // unique across the ledger; NewID("a_") makes one
	Run         RunRef
	ExecutionID string // "" for a direct call from the MCP host
	// CallID is the id the call is recorded under if it is made (budget.Call.ID).
	CallID string
	Tool   string
	Reason string // why approval is needed, as the person was told
	// Status is ApprovalPending (the question is being put), or ApprovalUnasked for a call
	// refused because this host cannot ask (recorded decided at once).
	Status ApprovalStatus
	// Times is how many calls the record stands for: 1 (0 means 1), or, for ApprovalUnasked
	// only, more for the summary a Meter writes at its execution's end of the refusals it
	// counted without recording them one by one (RecordedRefusals). A summary has no CallID.
	Times int64
}

// ApprovalDecision ends a pending approval.
type ApprovalDecision struct {
	ID     string
	Status ApprovalStatus // accepted, declined, cancelled, timed_out or failed
	// AnsweredBy is who answered, when the host says; "" otherwise.
	AnsweredBy string
}

// ApprovalRecord is an approval as the ledger holds it.
type ApprovalRecord struct {
	ApprovalAsk
	AnsweredBy string
	AskedAt    time.Time
	DecidedAt  time.Time // zero while pending
}

// ErrNotFound is returned for a call, execution or Run the ledger does not hold.
var ErrNotFound = errors.New("budget: not found")

// ErrAlreadyFinished is returned when a call that already has an end is finished again.
var ErrAlreadyFinished = errors.New("budget: call already finished")

// A Ledger is the durable record of Runs, executions and tool calls, and the source of the
// per-Run half of every meter; beside them it keeps paused calls (Pauses), executions'
// cassettes (Cassettes) and the shapes observed of tools' results (ObservedShapes). It is one
// contract, required whole: budget/sqlite and budget/postgres implement every method, and
// budget/ledgertest checks them all, so nothing asks a ledger what it can do. Implementations
// are safe for concurrent use, and for use by several processes (or machines, for a shared
// database) at once. Close may be called more than once.
type Ledger interface {
	Pauses
	Cassettes
	ObservedShapes
	Plans
	Programs
	Tasks

	// StartRun records a Run's start; starting a Run that exists does nothing.
	StartRun(ctx context.Context, run RunRef) error
	// EndRun records a Run's end. A Run that ended may still be used; its usage stands.
	EndRun(ctx context.Context, run RunRef) error
	// StartExecution records an execution's start within run (starting run if need be), with
	// the version hash of the agent whose program it runs, and returns the Run's usage as
	// RunUsage would read it then (every record queued by FinishCallLater counted).
	StartExecution(ctx context.Context, run RunRef, executionID, agentVersion string) (Usage, error)
	// EndExecution records an execution's end and returns its Run's context economy with this
	// end counted, as RunContext would read it then (docs/design.md §19.5).
	EndExecution(ctx context.Context, end ExecutionEnd) (telemetry.Context, error)

	// StartCall writes tool_call_started, spending the call, if the Run's usage has not
	// reached runLimits (a zero Limits sets no ceiling); check and write are one atomic step.
	// When the Run is exhausted it records the call as refused and unspent and returns a
	// *failure.Error of kind failure.BudgetExceeded. It returns the Run's usage after the write.
	// Calls with an empty ExecutionID are recorded but not counted in the Run's usage.
	StartCall(ctx context.Context, call CallStart, runLimits Limits) (Usage, error)
	// FinishCall writes tool_call_finished for a started call, adding its bytes to the Run's
	// usage. ErrNotFound for an unknown id, ErrAlreadyFinished for one with an end.
	FinishCall(ctx context.Context, fin CallFinish) error
	// FinishCallLater is FinishCall for a record that may lag (Ticket.FinishLater): it is
	// committed with the ledger's next write (the next call's tool_call_started), at a Flush,
	// or a few milliseconds later, and returns once it is.
	FinishCallLater(ctx context.Context, fin CallFinish) error
	// Flush commits every record FinishCallLater still holds queued, and returns once they
	// are committed.
	Flush(ctx context.Context) error
	// RefuseCall records calls refused before they were started (never spent): one, or a
	// summary of r.Times of them.
	RefuseCall(ctx context.Context, r Refusal) error
	// AskApproval records a call that needs a person's approval: pending while the question
	// is put, or unasked when this host cannot ask. It spends nothing: the call is recorded
	// (and spent) by StartCall only once it is approved.
	AskApproval(ctx context.Context, a ApprovalAsk) error
	// DecideApproval ends a pending approval. ErrNotFound for an unknown id; ErrAlreadyFinished
	// for one already ended, Recover's unknown included, after which the call must not be made.
	DecideApproval(ctx context.Context, d ApprovalDecision) error
	// Approvals returns a Run's approvals in the order they were asked.
	Approvals(ctx context.Context, run RunRef) ([]ApprovalRecord, error)
	// Charge adds usage not tied to one call (a handle window read, a preserved output) to the
	// Run and, when executionID is set, to that execution. u.Calls must be 0.
	Charge(ctx context.Context, run RunRef, executionID string, u Usage) error

	// RunUsage returns what the Run has used, counted from the ledger. A Run never seen has
	// zero usage.
	RunUsage(ctx context.Context, run RunRef) (Usage, error)
	// RunContext returns the context economy of the Run's ended executions, summed. A Run
	// never seen has a zero Context.
	RunContext(ctx context.Context, run RunRef) (telemetry.Context, error)
	// Execution returns one execution's record (what its egress proxy decided included);
	// ErrNotFound for an id the ledger does not hold.
	Execution(ctx context.Context, id string) (ExecutionRecord, error)
	// Call returns one recorded call.
	Call(ctx context.Context, id string) (CallRecord, error)
	// Calls returns a Run's call records, summaries of refusals included, in the order they
	// started.
	Calls(ctx context.Context, run RunRef) ([]CallRecord, error)
	// Recover marks every started call that has no end, and whose owner is gone (crashed or
	// closed), as Unknown, and returns the calls this pass changed. They stay counted and are
	// never replayed. Each open Ledger is an owner, alive while it holds its liveness token
	// (SQLite: a flock the kernel drops when the process dies; PostgreSQL: a lease row it
	// renews). Calls of a live owner, this one or another, are untouched. It may run at any
	// time and in several owners at once (RunRecovery runs it periodically): each call is
	// recorded unknown, and returned, once. It also records every pending approval of a gone
	// owner as ApprovalUnknown (not returned: no call was made for it).
	Recover(ctx context.Context) ([]CallRecord, error)
	// LeaseHeldUntil is when, by this process's clock, this owner's hold on its calls may
	// lapse at the earliest, after which a survivor may record its calls in flight unknown:
	// a PostgreSQL lease unless renewed, the zero time while none is held; NeverLapses for a
	// hold that lasts as long as the process (SQLite's lock). LeaseHeldSince is when the hold
	// held now was taken: a call started before it may have been recorded unknown in between
	// (a lease taken back after a stall). Ticket.SurelyOpen reads both.
	LeaseHeldUntil() time.Time
	LeaseHeldSince() time.Time

	Close() error
}

// NeverLapses is the LeaseHeldUntil of an owner whose hold on its calls lasts as long as its
// process: no survivor records its calls unknown while it lives.
var NeverLapses = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// times is a record's Times as stored: 0 means 1.
func times(n int64) int64 { return max(n, 1) }

// Check refuses an approval record no ledger may write.
func (a ApprovalAsk) Check() error {
	if a.Status != ApprovalPending && a.Status != ApprovalUnasked {
		return fmt.Errorf("budget: an approval is asked pending or recorded unasked, not %q", a.Status)
	}
	if a.Times > 1 && a.Status != ApprovalUnasked {
		return fmt.Errorf("budget: only unasked approvals are summarised, not %q", a.Status)
	}
	return nil
}

// RunRefusal is the refusal of a metered call by a Run whose usage u has reached runLimits, or
// nil while a call may still be admitted.
func RunRefusal(u Usage, runLimits Limits) *failure.Error {
	if which := u.Exhausted(runLimits, 0); which != "" {
		return failure.New(failure.BudgetExceeded, "the run's binding budget is spent: %s reached", which)
	}
	return nil
}

// RunCeiling is the usage at which a ledger's admission finds a Run spent: each of runLimits'
// call and byte meters, an unset one as no ceiling (math.MaxInt64).
func RunCeiling(runLimits Limits) Usage {
	return Usage{Calls: ceiling(int64(runLimits.MaxCalls)), TransferBytes: ceiling(runLimits.MaxTotalBytes),
		ProducedBytes: ceiling(runLimits.MaxProducedBytes), PreservedBytes: ceiling(runLimits.MaxPreservedBytes)}
}

// NewID returns a fresh random id with the given prefix: 128 bits, hex.
func NewID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return prefix + hex.EncodeToString(b[:])
}
