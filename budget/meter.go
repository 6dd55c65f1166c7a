package budget

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
)

// finishTimeout bounds the ledger write that ends a call or an execution; it runs detached
// from the caller's cancellation, because a cancelled call must still be recorded.
const finishTimeout = 5 * time.Second

// Call describes a call asking for admission.
type Call struct {
	// ID is the id to record the call under; "" means NewID("c_"). An approved call uses the
	// id its approval named (ApprovalAsk.CallID).
	ID            string
	Tool          string
	ArgumentBytes int64 // size of the encoded arguments
}

// A Meter meters one execution of a program within its Run. It is safe for concurrent use.
type Meter struct {
	ledger Ledger
	run    RunRef
	exec   string
	limits Limits

	mu       sync.Mutex // guards the fields below; never held across a ledger call
	used     Usage      // the execution's usage (Calls counts spent calls)
	inflight int64      // calls reserved and not yet written to the ledger
	reserved Usage      // transfer and preserved bytes promised to calls not yet finished
	answered Usage      // the bytes of calls answered whose finish has not landed (Ticket.Answered)
	runSeen  Usage      // the Run's usage as of the last ledger answer, with this meter's charges since
	// charging counts this meter's writes of bytes to the ledger under way (a call's finish,
	// Charge), and charges those ever begun: each adds its bytes to runSeen once the ledger has
	// them, so a Run usage the ledger reported while one was under way, which may or may not
	// hold its bytes, is not noted (noteRun): noted, it would count them twice or not at all.
	charging int
	charges  uint64
	ended    bool
	refusals map[refusalKey]*refusalTally // refusals counted per tool and kind (refusals.go)
	network  json.RawMessage              // NoteNetwork's, recorded by End
}

// Start records the start of execution executionID (NewID("x_") when empty) in run, by the
// agent of version agentVersion, and returns its Meter. limits apply to the execution and,
// counted from the ledger, to the Run.
func Start(ctx context.Context, l Ledger, run RunRef, executionID, agentVersion string, limits Limits) (*Meter, error) {
	if err := limits.Validate(); err != nil {
		return nil, err
	}
	if executionID == "" {
		executionID = NewID("x_")
	}
	u, err := l.StartExecution(ctx, run, executionID, agentVersion)
	if err != nil {
		return nil, err
	}
	return &Meter{ledger: l, run: run, exec: executionID, limits: limits, runSeen: u}, nil
}

// Direct returns a Meter for tool calls the MCP host makes directly, outside any program: it
// records them (started, finished, unknown after a crash) under run, with no execution and no
// ceilings, and they do not count against the Run's binding budget.
func Direct(l Ledger, run RunRef) *Meter {
	return &Meter{ledger: l, run: run}
}

// ExecutionID returns the id the execution is recorded under.
func (m *Meter) ExecutionID() string { return m.exec }

// Limits returns the limits the meter enforces.
func (m *Meter) Limits() Limits { return m.limits }

// Admit decides whether a call may reach its upstream. When it may, the call's
// tool_call_started record has been written and the call is spent: the caller must end it
// with Ticket.Finish whatever happens next. Otherwise the refusal has been recorded (or,
// past RecordedRefusals of its tool and kind, counted for End's summary) and the error's kind
// is failure.ArgumentTooLarge or failure.BudgetExceeded; or failure.Cancelled when ctx ended, or
// failure.Internal when the ledger failed, before the call was recorded (it is then not made).
func (m *Meter) Admit(ctx context.Context, c Call) (*Ticket, *failure.Error) {
	if c.ID == "" {
		c.ID = NewID("c_")
	}
	start := CallStart{ID: c.ID, Run: m.run, ExecutionID: m.exec, Tool: c.Tool, ArgumentBytes: c.ArgumentBytes}
	if c.ArgumentBytes > ceiling(m.limits.MaxArgumentBytes) {
		return nil, m.refuse(ctx, start, failure.New(failure.ArgumentTooLarge,
			"the arguments of %s are %d bytes, over max_argument_bytes (%d)", c.Tool, c.ArgumentBytes, m.limits.MaxArgumentBytes))
	}
	m.mu.Lock()
	if m.ended {
		m.mu.Unlock()
		return nil, failure.New(failure.BudgetExceeded, "the execution has ended")
	}
	if which := m.used.Exhausted(m.limits, m.inflight); which != "" {
		m.mu.Unlock()
		return nil, m.refuse(ctx, start, failure.New(failure.BudgetExceeded, "the execution's binding budget is spent: %s reached", which))
	}
	// A Run's usage only grows: one this meter has seen spent is spent, and the ledger need
	// not be asked (nor write a refusal per call: refuse counts them).
	if fe := RunRefusal(m.runSeen, m.limits); fe != nil {
		m.mu.Unlock()
		return nil, m.refuse(ctx, start, fe)
	}
	m.inflight++
	asked := m.markRun()
	m.mu.Unlock()

	sent := time.Now() // before the record: a lease taken back after this may not cover it
	runAfter, err := m.ledger.StartCall(ctx, start, m.limits)

	m.mu.Lock()
	defer m.mu.Unlock()
	m.inflight--
	if err != nil {
		var fe *failure.Error
		if errors.As(err, &fe) && fe.Kind == failure.BudgetExceeded {
			m.noteRun(runAfter, asked)
			// The ledger recorded this refusal itself: it counts among those recorded.
			m.countRecorded(refusalKey{tool: c.Tool, kind: string(fe.Kind)})
			return nil, fe
		}
		if ctx.Err() != nil {
			return nil, failure.Wrap(failure.Cancelled, err, "the call was cancelled before it was made")
		}
		return nil, failure.Wrap(failure.Internal, err, "the call could not be recorded, so it was not made")
	}
	m.used.Calls++
	m.noteRun(runAfter, asked)
	return &Ticket{m: m, id: start.ID, tool: c.Tool, sent: sent}, nil
}

// Refuse records a call the host refused before admitting it (invalid_arguments: keywords the
// binding does not take, or arguments its input schema rejects), bounded as Admit's refusals
// are (docs/design.md §6.3). It returns fe, with Err set when the record could not be written.
func (m *Meter) Refuse(ctx context.Context, c Call, fe *failure.Error) *failure.Error {
	if c.ID == "" {
		c.ID = NewID("c_")
	}
	return m.refuse(ctx, CallStart{ID: c.ID, Run: m.run, ExecutionID: m.exec, Tool: c.Tool, ArgumentBytes: c.ArgumentBytes}, fe)
}

// refuse records a refusal of Admit, or only counts it once RecordedRefusals of its tool and
// kind are recorded (End records the rest as one summary).
func (m *Meter) refuse(ctx context.Context, c CallStart, fe *failure.Error) *failure.Error {
	m.mu.Lock()
	record := m.countRefusal(refusalKey{tool: c.Tool, kind: string(fe.Kind)}, fe.Message, c.ArgumentBytes)
	m.mu.Unlock()
	if !record {
		return fe
	}
	if err := m.ledger.RefuseCall(ctx, Refusal{CallStart: c, Kind: string(fe.Kind), Message: fe.Message}); err != nil {
		fe.Err = err // the refusal stands; the operator learns it went unrecorded
		m.unrecorded(refusalKey{tool: c.Tool, kind: string(fe.Kind)}, fe.Message, c.ArgumentBytes)
	}
	return fe
}

// runMark is where this meter's charges stood when it asked the ledger for the Run's usage.
type runMark struct {
	charges uint64
	clear   bool // no charge was under way
}

// markRun is taken, with mu held, before the ledger is asked for the Run's usage.
func (m *Meter) markRun() runMark { return runMark{charges: m.charges, clear: m.charging == 0} }

// noteRun keeps the latest Run usage the ledger reported, asked at mark. Its bytes only when
// no charge of this meter was under way at any time since (none at the mark, none begun
// after it): the usage then holds exactly the charges runSeen has added. Its calls always:
// admission alone counts them, and no charge does. Called with mu held.
func (m *Meter) noteRun(u Usage, asked runMark) {
	if u.Calls < m.runSeen.Calls {
		return // older than a usage already noted
	}
	if asked.clear && m.charges == asked.charges {
		m.runSeen = u
		return
	}
	m.runSeen.Calls = u.Calls
}

// beginCharge counts a write of bytes to the ledger under way; the caller ends it, with mu
// held, where it adds them to runSeen (or not, on failure).
func (m *Meter) beginCharge() {
	m.mu.Lock()
	m.charging++
	m.charges++
	m.mu.Unlock()
}

// TransferAllowance returns how many bytes may still cross into the sandbox in one piece: the
// per-call ceiling (max_result_bytes) or what is left of max_total_bytes for the execution and
// for the Run as last seen, less what concurrent calls have reserved, whichever is least. A
// result over it goes to the program as a handle (or is refused), never truncated.
func (m *Meter) TransferAllowance() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.transferLeft()
}

// transferLeft is TransferAllowance with mu held.
func (m *Meter) transferLeft() int64 {
	total := ceiling(m.limits.MaxTotalBytes)
	if total == math.MaxInt64 && m.limits.MaxResultBytes <= 0 {
		return math.MaxInt64
	}
	left := min(ceiling(m.limits.MaxResultBytes), total-m.used.TransferBytes-m.reserved.TransferBytes,
		total-m.runSeen.TransferBytes-m.reserved.TransferBytes)
	return max(left, 0)
}

// PreservedAllowance returns how many bytes may still be kept in the blob store or ledger for
// this execution and Run, less what concurrent calls have reserved.
func (m *Meter) PreservedAllowance() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.preservedLeft()
}

func (m *Meter) preservedLeft() int64 {
	total := ceiling(m.limits.MaxPreservedBytes)
	if total == math.MaxInt64 {
		return math.MaxInt64
	}
	return max(min(total-m.used.PreservedBytes, total-m.runSeen.PreservedBytes)-m.reserved.PreservedBytes, 0)
}

// reserve promises u's transfer and preserved bytes to one caller, if they fit what is left;
// the promise ends with release. Byte meters are exact under concurrency this way: two calls
// racing for the last megabyte cannot both have it.
func (m *Meter) reserve(u Usage) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if u.TransferBytes > m.transferLeft() || u.PreservedBytes > m.preservedLeft() {
		return false
	}
	m.reserved.TransferBytes += u.TransferBytes
	m.reserved.PreservedBytes += u.PreservedBytes
	return true
}

func (m *Meter) release(u Usage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reserved.TransferBytes -= u.TransferBytes
	m.reserved.PreservedBytes -= u.PreservedBytes
}

// TryCharge charges u (no call) if its bytes fit what is left, and reports whether it did:
// a window of a handle read into the sandbox is refused rather than let past the ceiling.
func (m *Meter) TryCharge(ctx context.Context, u Usage) (bool, error) {
	if !m.reserve(u) {
		return false, nil
	}
	defer m.release(u)
	return true, m.Charge(ctx, u)
}

// Charge adds usage not tied to one call to the execution and the Run: a window of a handle
// read into the sandbox, an output preserved in the blob store. u.Calls must be 0.
func (m *Meter) Charge(ctx context.Context, u Usage) error {
	m.beginCharge()
	err := m.ledger.Charge(ctx, m.run, m.exec, u)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.charging--
	if err == nil {
		m.used = m.used.Add(u)
		m.runSeen = m.runSeen.Add(u)
	}
	return err
}

// Seen returns the execution's usage and the Run's as this meter last saw it, without asking
// the ledger, with the bytes of calls answered and not yet finished (Ticket.Answered): what a
// program's budget.remaining() is answered from, however often it asks.
func (m *Meter) Seen() (execution, run Usage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.used.Add(m.answered), m.runSeen.Add(m.answered)
}

// Usage returns the execution's usage and the Run's, the latter read from the ledger.
func (m *Meter) Usage(ctx context.Context) (execution, run Usage, err error) {
	m.mu.Lock()
	asked := m.markRun()
	m.mu.Unlock()
	run, err = m.ledger.RunUsage(ctx, m.run)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil {
		m.noteRun(run, asked)
	}
	return m.used, run, err
}

// AskApproval records, under the meter's Run and execution, a call that needs a person's
// approval (Ledger.AskApproval); it spends nothing. Unasked ones are counted per tool and
// reason like Admit's refusals: past RecordedRefusals, End records them as one summary.
func (m *Meter) AskApproval(ctx context.Context, a ApprovalAsk) error {
	a.Run, a.ExecutionID = m.run, m.exec
	if a.Status == ApprovalUnasked && times(a.Times) == 1 {
		m.mu.Lock()
		record := m.countRefusal(refusalKey{approval: true, tool: a.Tool, kind: a.Reason}, "", 0)
		m.mu.Unlock()
		if !record {
			return nil
		}
		if err := m.ledger.AskApproval(ctx, a); err != nil {
			m.unrecorded(refusalKey{approval: true, tool: a.Tool, kind: a.Reason}, "", 0)
			return err
		}
		return nil
	}
	return m.ledger.AskApproval(ctx, a)
}

// DecideApproval ends a pending approval (Ledger.DecideApproval). It runs detached from ctx's
// cancellation, like Ticket.Finish: the end of a wait must be recorded however it ended.
func (m *Meter) DecideApproval(ctx context.Context, d ApprovalDecision) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	return m.ledger.DecideApproval(ctx, d)
}

// End records the summaries of the refusals counted and not recorded one by one, then the
// execution's end, and returns the context economy of the Run's ended executions, this one
// included. Calls admitted afterwards are refused. status is "completed" or the failure kind;
// attachments is the JSON array of its outputs' attachments; c is its context economy.
func (m *Meter) End(ctx context.Context, status string, attachments json.RawMessage, c telemetry.Context) (telemetry.Context, error) {
	m.mu.Lock()
	m.ended = true
	network, used := m.network, m.used
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	serr := m.recordSummaries(ctx)
	run, err := m.ledger.EndExecution(ctx, ExecutionEnd{ID: m.exec, Status: status, Attachments: attachments, Context: c,
		Network: network, Usage: used})
	return run, errors.Join(serr, err)
}

// NoteNetwork keeps what the execution's egress proxy decided (egress.Stats.Record), for End
// to record with the execution's end.
func (m *Meter) NoteNetwork(record json.RawMessage) {
	m.mu.Lock()
	m.network = record
	m.mu.Unlock()
}

// A Ticket is an admitted, spent call. Finish it exactly once.
type Ticket struct {
	m    *Meter
	id   string
	tool string
	sent time.Time // when tool_call_started was sent (this clock)
	once sync.Once
	err  error

	rmu      sync.Mutex // guards reserved
	reserved Usage      // bytes promised by Reserve, released by Finish

	answered Usage // Answered's, until finish takes it over; guarded by m.mu
	finished bool  // finish has run; guarded by m.mu
}

// Answered notes that the program holds f's answer before tool_call_finished lands (it may
// lag: FinishLater), so Seen, and with it budget.remaining(), counts f's bytes from now on
// and never shows what a program already received as still left. finish takes them over.
func (t *Ticket) Answered(f CallFinish) {
	u := f.Usage.bytes()
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	if t.finished {
		return
	}
	t.m.answered = t.m.answered.Sub(t.answered).Add(u) // a second note replaces the first
	t.answered = u
}

// ID returns the call's ledger id.
func (t *Ticket) ID() string { return t.id }

// TransferAllowance is the Meter's: what this call may hand the program inline.
func (t *Ticket) TransferAllowance() int64 { return t.m.TransferAllowance() }

// Reserve promises this call u's transfer and preserved bytes if they fit what is left, and
// reports whether they did. Finish releases the promise as it charges what the call used.
func (t *Ticket) Reserve(u Usage) bool {
	if !t.m.reserve(u) {
		return false
	}
	t.rmu.Lock()
	t.reserved = t.reserved.Add(u)
	t.rmu.Unlock()
	return true
}

// Finish writes tool_call_finished, f (its ID is the ticket's, its Usage.Calls ignored), and
// charges the call's bytes. It runs detached from ctx's cancellation (a cancelled call must
// still be recorded). Later calls return the first result.
func (t *Ticket) Finish(ctx context.Context, f CallFinish) error { return t.finish(ctx, f, false) }

// FinishLater is Finish for a record that may lag: the ledger commits it with its next batch
// (the next call's tool_call_started, Meter.Flush, or a few milliseconds), and FinishLater
// returns once it has. The call's bytes stay reserved until then, so the meters never
// undercount.
func (t *Ticket) FinishLater(ctx context.Context, f CallFinish) error { return t.finish(ctx, f, true) }

// SurelyOpen reports whether t's call is surely still recorded started: its ledger's hold on
// it never lapses while the process lives (SQLite's lock, NeverLapses), or its lease surely
// still holds and
// has held since before the call was started, with no loss in between (a lease taken back
// after a stall is fresh, but a survivor may have recorded the call unknown during the
// stall). When it is false, the call's result is handed over only once Finish has found its
// record still started (package binding).
func (t *Ticket) SurelyOpen() bool {
	l := t.m.ledger
	return time.Now().Before(l.LeaseHeldUntil()) && !l.LeaseHeldSince().After(t.sent)
}

// Flush commits the records the meter's ledger still holds queued (FinishLater's), so the
// Run's usage read next counts them.
func (m *Meter) Flush(ctx context.Context) error { return m.ledger.Flush(ctx) }

func (t *Ticket) finish(ctx context.Context, fin CallFinish, later bool) error {
	t.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
		defer cancel()
		u := fin.Usage.bytes()
		fin.ID, fin.Usage = t.id, u
		t.m.beginCharge()
		if later {
			t.err = t.m.ledger.FinishCallLater(ctx, fin)
		} else {
			t.err = t.m.ledger.FinishCall(ctx, fin)
		}
		charged := t.err == nil
		if errors.Is(t.err, ErrAlreadyFinished) && u != (Usage{}) {
			// Recorded unknown by a survivor while it ran (this owner stalled past its lease):
			// the record stands, and the bytes that arrived are charged to the Run and the
			// execution all the same, so none escapes the meters.
			if cerr := t.m.ledger.Charge(ctx, t.m.run, t.m.exec, u); cerr != nil {
				t.err = errors.Join(t.err, cerr)
			} else {
				charged = true
			}
		}
		t.rmu.Lock()
		promised := t.reserved
		t.rmu.Unlock()
		t.m.mu.Lock()
		t.m.charging--
		t.m.reserved.TransferBytes -= promised.TransferBytes
		t.m.reserved.PreservedBytes -= promised.PreservedBytes
		t.m.answered = t.m.answered.Sub(t.answered)
		t.answered, t.finished = Usage{}, true
		if charged {
			t.m.used = t.m.used.Add(u)
			t.m.runSeen = t.m.runSeen.Add(u)
		}
		t.m.mu.Unlock()
	})
	return t.err
}
