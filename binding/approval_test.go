package binding

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/approval"
	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/budget/sqlite"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

// asker is a person who answers with action (or, with action "", never answers), or a host
// that cannot ask (cannot != ""). It keeps the questions it was asked.
type asker struct {
	action, by, cannot string
	err                error
	during             func(q approval.Question) // runs while the question is open

	mu        sync.Mutex
	questions []approval.Question
}

func (a *asker) CanAsk() (bool, string) { return a.cannot == "", a.cannot }

func (a *asker) Ask(ctx context.Context, q approval.Question) (approval.Answer, error) {
	a.mu.Lock()
	a.questions = append(a.questions, q)
	a.mu.Unlock()
	if a.during != nil {
		a.during(q)
	}
	if a.err != nil {
		return approval.Answer{}, a.err
	}
	if a.action == "" {
		<-ctx.Done()
		return approval.Answer{}, ctx.Err()
	}
	return approval.Answer{Action: a.action, By: a.by}, nil
}

func (a *asker) asked() []approval.Question {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]approval.Question(nil), a.questions...)
}

// approvalSetup is an execution over f's turn, metered in a fresh ledger, asking through a.
func approvalSetup(t *testing.T, f *fixture, turn *upstream.Turn, a *approval.Asking) (*Execution, budget.Ledger, *budget.Meter) {
	t.Helper()
	return approvalSetupLogged(t, f, turn, a, discard())
}

// approvalSetupLogged is approvalSetup logging to log.
func approvalSetupLogged(t *testing.T, f *fixture, turn *upstream.Turn, a *approval.Asking, log *slog.Logger) (*Execution, budget.Ledger, *budget.Meter) {
	t.Helper()
	led, err := sqlite.Open(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	m, err := budget.Start(context.Background(), led, budget.RunRef{Tenant: "t", ID: "r"}, "", "", budget.Limits{MaxCalls: 10})
	if err != nil {
		t.Fatal(err)
	}
	if turn == nil {
		turn = f.turn(t)
	}
	return New(&Options{Turn: turn, Meter: m, Tenant: "t", Logger: log, Approvals: a}), led, m
}

func approvals(t *testing.T, led budget.Ledger) []budget.ApprovalRecord {
	t.Helper()
	recs, err := led.Approvals(context.Background(), budget.RunRef{Tenant: "t", ID: "r"})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestApprovalStep: one call of a destructive tool inside a program, for every answer a
// person (or a host) can give: the upstream is reached exactly when the person accepted, the
// program hears the kind the contract names, and the ledger and the counts hold the decision.
func TestApprovalStep(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name     string
		asker    *asker
		kind     failure.Kind
		status   budget.ApprovalStatus
		counts   approval.Counts
		inText   string
		noAsker  bool
		answered string
	}{
		{name: "accept", asker: &asker{action: approval.Accept, by: "ann"}, status: budget.ApprovalAccepted,
			counts: approval.Counts{Asked: 1, Accepted: 1}, answered: "ann"},
		{name: "decline", asker: &asker{action: approval.Decline}, kind: failure.Denied, status: budget.ApprovalDeclined,
			counts: approval.Counts{Asked: 1, Declined: 1}, inText: "declined"},
		{name: "cancel", asker: &asker{action: approval.Cancel}, kind: failure.Denied, status: budget.ApprovalCancelled,
			counts: approval.Counts{Asked: 1, Declined: 1}, inText: "dismissed"},
		{name: "no answer", asker: &asker{}, kind: failure.ApprovalRequiredInProgram, status: budget.ApprovalTimedOut,
			counts: approval.Counts{Asked: 1, TimedOut: 1}, inText: "nobody answered"},
		{name: "host error", asker: &asker{err: errors.New("method not found")}, kind: failure.ApprovalRequiredInProgram,
			status: budget.ApprovalFailed, counts: approval.Counts{Asked: 1}, inText: "no answer from the host"},
		{name: "cannot ask", asker: &asker{cannot: "the MCP client did not declare the elicitation capability"},
			kind: failure.ApprovalRequiredInProgram, status: budget.ApprovalUnasked, counts: approval.Counts{Unasked: 1},
			inText: "did not declare the elicitation capability"},
		{name: "no asker", noAsker: true, kind: failure.ApprovalRequiredInProgram, status: budget.ApprovalUnasked,
			counts: approval.Counts{Unasked: 1}, inText: "cannot ask for it"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := f.calls("wipe")
			a := &approval.Asking{Asker: tc.asker, Timeout: 300 * time.Millisecond}
			if tc.noAsker {
				a = nil
			}
			x, led, m := approvalSetup(t, f, nil, a)
			start := time.Now()
			r := callOf(t, x, "up__wipe", `{"s":"all"}`)
			x.Wait()
			if took := time.Since(start); took > gate.Scaled(10*time.Second) {
				t.Errorf("the call took %v", took)
			}
			if r.Kind != tc.kind || !strings.Contains(r.Message, tc.inText) {
				t.Errorf("reply %+v; want kind %q mentioning %q", r, tc.kind, tc.inText)
			}
			// A refusal never tells the model to call some other tool.
			if strings.Contains(r.Message, "directly") {
				t.Errorf("refusal points elsewhere: %s", r.Message)
			}
			want := 0
			if tc.kind == "" {
				want = 1
			}
			if got := f.calls("wipe") - before; got != want {
				t.Errorf("upstream called %d times, want %d", got, want)
			}
			if got := x.Approvals(); got != tc.counts {
				t.Errorf("counts %+v, want %+v", got, tc.counts)
			}
			// The result's tool_calls say who approved the call made, and that a declined one was
			// denied.
			if calls, _ := x.ToolCalls(); len(calls) != 1 || (want == 1) != (calls[0].ApprovedBy != nil && *calls[0].ApprovedBy == ApprovedByPerson) ||
				(tc.kind == failure.Denied) != (calls[0].Outcome == CallDenied) {
				t.Errorf("tool_calls %+v", calls)
			}
			recs := approvals(t, led)
			if len(recs) != 1 || recs[0].Status != tc.status || recs[0].Tool != "up__wipe" || recs[0].AnsweredBy != tc.answered ||
				recs[0].ExecutionID != m.ExecutionID() || !strings.Contains(recs[0].Reason, "destructive") {
				t.Fatalf("approval records %+v; want one %s", recs, tc.status)
			}
			// The call's own record exists exactly when it was made, under the id its approval named.
			rec, err := led.Call(context.Background(), recs[0].CallID)
			switch {
			case want == 1 && (err != nil || rec.Status != budget.Succeeded):
				t.Errorf("approved call record %+v, %v", rec, err)
			case want == 0 && !errors.Is(err, budget.ErrNotFound):
				t.Errorf("a refused call was recorded: %+v, %v", rec, err)
			}
			if _, run, _ := m.Usage(context.Background()); run.Calls != int64(want) {
				t.Errorf("run spent %d calls, want %d", run.Calls, want)
			}
		})
	}
}

// TestApprovalQuestion: the person is told the tool, why, and the arguments in full, but for
// a URL's password, which is named as not shown.
func TestApprovalQuestion(t *testing.T) {
	f := newFixture(t)
	a := &asker{action: approval.Decline}
	x, _, _ := approvalSetup(t, f, nil, &approval.Asking{Asker: a, Timeout: time.Minute})
	x.CallTool(context.Background(), "up__wipe", json.RawMessage(`{"s":"https://u:pw@db.example/x?token=abc"}`))
	qs := a.asked()
	if len(qs) != 1 {
		t.Fatalf("asked %d questions", len(qs))
	}
	msg := qs[0].Message()
	for _, want := range []string{"up__wipe", "destructive", "https://u:[redacted]@db.example/x?token=abc", "A program", "1m0s",
		"Not shown: s (the password in a URL's userinfo)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("question lacks %q:\n%s", want, msg)
		}
	}
	for _, secret := range []string{"pw@"} {
		if strings.Contains(msg, secret) {
			t.Errorf("question shows %q:\n%s", secret, msg)
		}
	}
}

// TestApprovalLeavesTheProgramTime: inside a program the wait ends a second before the wall
// clock, so the program hears the refusal and goes on; with too little time left nobody is
// asked.
func TestApprovalLeavesTheProgramTime(t *testing.T) {
	f := newFixture(t)
	a := &asker{}
	x, led, _ := approvalSetup(t, f, nil, &approval.Asking{Asker: a, Timeout: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	r := x.CallTool(ctx, "up__wipe", json.RawMessage(`{"s":"x"}`))
	if r.Kind != failure.ApprovalRequiredInProgram || ctx.Err() != nil {
		t.Errorf("reply %+v, context %v; want a timed-out refusal before the wall clock", r, ctx.Err())
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel2()
	r = x.CallTool(ctx2, "up__wipe", json.RawMessage(`{"s":"x"}`))
	if r.Kind != failure.ApprovalRequiredInProgram || !strings.Contains(r.Message, "too little time") {
		t.Errorf("reply %+v; want a refusal without asking", r)
	}
	if n := len(a.asked()); n != 1 {
		t.Errorf("asked %d times, want 1", n)
	}
	recs := approvals(t, led)
	if len(recs) != 2 || recs[0].Status != budget.ApprovalTimedOut || recs[1].Status != budget.ApprovalUnasked {
		t.Errorf("records %+v", recs)
	}
	// A cancelled call stops waiting at once and is recorded failed.
	ctx3, cancel3 := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel3)
	r = x.CallTool(ctx3, "up__wipe", json.RawMessage(`{"s":"x"}`))
	if r.Kind != failure.Cancelled {
		t.Errorf("cancelled while waiting: %+v", r)
	}
	if recs := approvals(t, led); len(recs) != 3 || recs[2].Status != budget.ApprovalFailed {
		t.Errorf("records %+v", recs)
	}
	if f.calls("wipe") != 0 {
		t.Errorf("the upstream was called")
	}
}

// TestApprovalNotRecordedIsNotActedOn: an acceptance whose approval was ended meanwhile (a
// survivor recorded it unknown after this host stalled) does not make the call.
func TestApprovalNotRecordedIsNotActedOn(t *testing.T) {
	f := newFixture(t)
	a := &asker{action: approval.Accept}
	x, led, _ := approvalSetup(t, f, nil, &approval.Asking{Asker: a, Timeout: time.Minute})
	a.during = func(approval.Question) {
		recs := approvals(t, led)
		if err := led.DecideApproval(context.Background(), budget.ApprovalDecision{ID: recs[0].ID, Status: budget.ApprovalFailed}); err != nil {
			t.Error(err)
		}
	}
	r := callOf(t, x, "up__wipe", `{"s":"x"}`)
	if r.Kind != failure.UpstreamError || f.calls("wipe") != 0 {
		t.Errorf("reply %+v, wipe called %d times; want a refusal and no call", r, f.calls("wipe"))
	}
}

// TestApprovalRulesInCalls: an argument rule denies a value before anyone is asked, or asks
// for one it does not allow; allowed values pass without a question.
func TestApprovalRulesInCalls(t *testing.T) {
	f := newFixture(t)
	turn := f.pool.Catalogue(context.Background()).ResolvePolicy(upstream.Policy{
		Grant: []string{"up"},
		Rules: []upstream.Rule{
			{Tool: "up__echo", Argument: "s", Allow: []string{"a", "b"}, Otherwise: upstream.RuleApproval},
			{Tool: "up__add", Argument: "s", Pattern: `[0-9]+`, Otherwise: upstream.RuleDeny},
		},
	})
	a := &asker{action: approval.Accept}
	x, _, _ := approvalSetup(t, f, turn, &approval.Asking{Asker: a})
	if r := callOf(t, x, "up__echo", `{"s":"a"}`); r.Kind != "" {
		t.Errorf("allowed value: %+v", r)
	}
	if r := callOf(t, x, "up__echo", `{"s":"c"}`); r.Kind != "" || string(r.Value) != `"echo c"` {
		t.Errorf("approved value: %+v", r)
	}
	wantKind(t, callOf(t, x, "up__add", `{"s":"x1"}`), failure.Denied)
	if r := callOf(t, x, "up__add", `{"s":"12"}`); r.Kind != "" {
		t.Errorf("allowed by pattern: %+v", r)
	}
	qs := a.asked()
	if len(qs) != 1 || !strings.Contains(strings.Join(qs[0].Reasons, " "), `argument "s"`) {
		t.Errorf("questions %+v; want one, about argument s", qs)
	}
	if got := f.calls("echo") + f.calls("add"); got != 3 {
		t.Errorf("upstream calls %d, want 3", got)
	}
}

// TestDirectApproval: a host's direct call takes the same step: accepted it runs once,
// declined or unanswered it does not, and without an asker it is refused with a true reason.
func TestDirectApproval(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	bindings := []string{}
	turn := f.pool.Catalogue(ctx).Resolve([]string{"up"}, []string{"up__secret"}, nil, &bindings)
	direct := func(a *approval.Asking) toolcall.Answer {
		return Direct(ctx, turn, nil, a, discard(), "up__wipe", json.RawMessage(`{"s":"x"}`))
	}
	if r := direct(&approval.Asking{Asker: &asker{action: approval.Accept}}); r.Kind != "" {
		t.Errorf("accepted direct wipe = %+v", r)
	}
	wantKind(t, direct(&approval.Asking{Asker: &asker{action: approval.Decline}}), failure.Denied)
	wantKind(t, direct(&approval.Asking{Asker: &asker{}, Timeout: 200 * time.Millisecond}), failure.ApprovalRequiredInProgram)
	r := direct(nil)
	wantKind(t, r, failure.ApprovalRequiredInProgram)
	if !strings.Contains(r.Message, "needs a person's approval") || !strings.Contains(r.Message, "cannot ask") {
		t.Errorf("refusal without an asker: %s", r.Message)
	}
	if got := f.calls("wipe"); got != 1 {
		t.Errorf("wipe called %d times, want 1", got)
	}
}

// A program looping on a call nobody can approve fills neither the ledger nor the operator's
// log: approval.LoggedUnasked decisions are logged one by one, then one line says the rest are only
// counted; the counts stay exact.
func TestUnaskedDecisionsLoggedBounded(t *testing.T) {
	var logged strings.Builder
	x, _, _ := approvalSetupLogged(t, newFixture(t), nil, nil, slog.New(slog.NewTextHandler(&logged, nil)))
	const loops = 50
	for range loops {
		if r := callOf(t, x, "up__wipe", `{"s":"all"}`); r.Kind != failure.ApprovalRequiredInProgram {
			t.Fatalf("reply %+v, want approval_required_in_program", r)
		}
	}
	x.Wait()
	if got := x.Approvals(); got.Unasked != loops {
		t.Errorf("counts %+v, want %d unasked", got, loops)
	}
	lines := strings.Count(logged.String(), "msg=approval ")
	if lines != approval.LoggedUnasked || strings.Count(logged.String(), "counted, not logged") != 1 {
		t.Errorf("%d decision lines (want %d) and one saying the rest are counted:\n%s", lines, approval.LoggedUnasked, logged.String())
	}
}

// TestApprovalQuestionShowsAllOrIsNotAsked: the three ways a redacted view hid what a person
// approved (padding keys pushing a declared value out of a cut view, a secret-looking key
// hiding a value, a value nested past the shown depth) each end with the decisive value in
// the question or with no question at all: never an incomplete one.
func TestApprovalQuestionShowsAllOrIsNotAsked(t *testing.T) {
	f := newFixture(t)
	padding := map[string]any{"amount": 999999, "to": "mallory", "pin": "1234"}
	for i := range 300 {
		padding[fmt.Sprintf("a%03d", i)] = strings.Repeat("x", 20)
	}
	tooMuch := map[string]any{"amount": 999999}
	for i := range 2000 {
		tooMuch[fmt.Sprintf("a%04d", i)] = strings.Repeat("x", 20)
	}
	deep := any(map[string]any{"amount": 999999})
	for range 17 {
		deep = map[string]any{"n": deep}
	}
	tests := []struct {
		name string
		args any
		// shown: the question holds each; "" in refused: the call is asked.
		shown   []string
		refused string
	}{
		{name: "padding", args: padding, shown: []string{"  amount = 999999\n  pin = [redacted]\n  to = \"mallory\"\n  a000 = ",
			"a299 = ", "Not shown: pin (the tool's schema marks it writeOnly)"}},
		{name: "padding past the question's bound", args: tooMuch, refused: "bytes a question holds"},
		{name: "secret-looking key", args: map[string]any{"amount": 1, "amount_token": "999999"}, refused: "amount_token is named like a secret"},
		{name: "secret-looking number", args: map[string]any{"amount": 1, "max_tokens": 999999}, shown: []string{"max_tokens = 999999"}},
		{name: "nested 18 deep", args: map[string]any{"amount": 1, "to": "x", "deep": deep}, refused: "nests deeper than the 16 levels"},
		{name: "nested 16 deep", args: map[string]any{"deep": map[string]any{"a": map[string]any{"b": []any{map[string]any{"amount": 999999}}}}},
			shown: []string{`deep.a.b[0].amount = 999999`}},
		{name: "a forged line", args: map[string]any{"to": "x\n  amount = 1"}, shown: []string{`to = "x\n  amount = 1"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &asker{action: approval.Accept}
			x, led, _ := approvalSetup(t, f, nil, &approval.Asking{Asker: a, Timeout: time.Minute})
			args, _ := json.Marshal(tc.args)
			before := f.calls("pay")
			r := x.CallTool(context.Background(), "up__pay", args)
			qs := a.asked()
			if tc.refused != "" {
				if len(qs) != 0 || r.Kind != failure.ApprovalRequiredInProgram || !strings.Contains(r.Message, tc.refused) ||
					!strings.Contains(r.Message, "nobody was asked") {
					t.Fatalf("asked %d, reply %+v; want refused unasked, mentioning %q", len(qs), r, tc.refused)
				}
				if recs := approvals(t, led); len(recs) != 1 || recs[0].Status != budget.ApprovalUnasked {
					t.Errorf("approval records %+v; want one unasked", recs)
				}
				if f.calls("pay") != before {
					t.Error("the upstream was called")
				}
				return
			}
			if len(qs) != 1 || r.Kind != "" {
				t.Fatalf("asked %d, reply %+v; want one question, accepted", len(qs), r)
			}
			msg := qs[0].Message()
			for _, want := range tc.shown {
				if !strings.Contains(msg, want) {
					t.Errorf("question lacks %q:\n%s", want, msg)
				}
			}
			if strings.Contains(msg, "1234") {
				t.Errorf("question shows the writeOnly pin:\n%s", msg)
			}
		})
	}
}

// TestOneQuestionAtATime: 300 concurrent calls of one program that need approval put at most
// one question to the person at a time; after approval.MaxDeclinesInARow declines the rest are refused
// without asking, and the ledger holds them as unasked refusals are held: the first few one by
// one, the rest in one summary.
func TestOneQuestionAtATime(t *testing.T) {
	f := newFixture(t)
	var open, peak, asked atomic.Int32
	a := &asker{action: approval.Decline, during: func(approval.Question) {
		asked.Add(1)
		n := open.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(time.Millisecond)
		open.Add(-1)
	}}
	x, led, m := approvalSetup(t, f, nil, &approval.Asking{Asker: a, Timeout: time.Minute})
	var wg sync.WaitGroup
	kinds := make(chan failure.Kind, 300)
	for range 300 {
		wg.Go(func() { kinds <- x.CallTool(context.Background(), "up__wipe", json.RawMessage(`{"s":"x"}`)).Kind })
	}
	wg.Wait()
	close(kinds)
	if p := peak.Load(); p != 1 {
		t.Errorf("at most %d questions were open at once, want 1", p)
	}
	if n := asked.Load(); n != approval.MaxDeclinesInARow {
		t.Errorf("%d questions asked, want %d", n, approval.MaxDeclinesInARow)
	}
	for k := range kinds {
		if k != failure.Denied {
			t.Errorf("a call ended %q, want denied", k)
		}
	}
	if got, want := x.Approvals(), (approval.Counts{Asked: approval.MaxDeclinesInARow, Declined: approval.MaxDeclinesInARow, Unasked: 300 - approval.MaxDeclinesInARow}); got != want {
		t.Errorf("counts %+v, want %+v", got, want)
	}
	if _, err := m.End(context.Background(), "completed", nil, telemetry.Context{}); err != nil {
		t.Fatal(err)
	}
	var declined, unasked, records int64
	for _, r := range approvals(t, led) {
		records++
		switch r.Status {
		case budget.ApprovalDeclined:
			declined++
		case budget.ApprovalUnasked:
			unasked += max(r.Times, 1)
		}
	}
	if declined != approval.MaxDeclinesInARow || unasked != 300-approval.MaxDeclinesInARow || records > approval.MaxDeclinesInARow+budget.RecordedRefusals+1 {
		t.Errorf("ledger: %d records, %d declined, %d unasked; want %d declined, %d unasked in at most %d records",
			records, declined, unasked, approval.MaxDeclinesInARow, 300-approval.MaxDeclinesInARow, approval.MaxDeclinesInARow+budget.RecordedRefusals+1)
	}
	if f.calls("wipe") != 0 {
		t.Error("the upstream was called")
	}
}

// TestQueuedQuestionsLapse: a call whose turn to ask does not come within its approval wait
// (or comes with too little of it left) is refused unasked, and says why.
func TestQueuedQuestionsLapse(t *testing.T) {
	f := newFixture(t)
	a := &asker{} // never answers
	x, _, _ := approvalSetup(t, f, nil, &approval.Asking{Asker: a, Timeout: 1500 * time.Millisecond})
	var wg sync.WaitGroup
	replies := make(chan toolcall.Answer, 2)
	for range 2 {
		wg.Go(func() { replies <- x.CallTool(context.Background(), "up__wipe", json.RawMessage(`{"s":"x"}`)) })
	}
	wg.Wait()
	close(replies)
	var msgs []string
	for r := range replies {
		msgs = append(msgs, r.Message)
	}
	if len(a.asked()) != 1 || !slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, "nobody answered") }) ||
		!slices.ContainsFunc(msgs, func(m string) bool {
			// The turn may come as the wait ends, with too little of it left to ask.
			return strings.Contains(m, "another question of this program stayed open") || strings.Contains(m, "too little of the wait was left")
		}) {
		t.Errorf("asked %d; replies %q", len(a.asked()), msgs)
	}
}
