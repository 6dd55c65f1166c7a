package approval

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/budget/sqlite"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// TestMain fails the package when a goroutine outlives its test: a Room's poller runs only
// while a question waits, and every Asker's goroutine is waited for.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// person is an Asker: it answers with action (or, with action "", only through its Room: it
// waits until the question is withdrawn), and keeps the questions it was put and why each
// was withdrawn.
type person struct {
	action string

	mu        sync.Mutex
	asked     []Question
	withdrawn []error
	put       chan Question // receives each question as it is put, when not nil
}

func (p *person) CanAsk() (bool, string) { return true, "" }

func (p *person) Ask(ctx context.Context, q Question) (Answer, error) {
	p.mu.Lock()
	p.asked = append(p.asked, q)
	p.mu.Unlock()
	if p.put != nil {
		p.put <- q
	}
	if p.action != "" {
		return Answer{Action: p.action, By: "ann"}, nil
	}
	<-ctx.Done()
	p.mu.Lock()
	p.withdrawn = append(p.withdrawn, context.Cause(ctx))
	p.mu.Unlock()
	return Answer{}, ctx.Err()
}

func (p *person) causes() []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]error(nil), p.withdrawn...)
}

func question() Question {
	return Question{Tool: "up__wipe", Arguments: "  s = \"x\"\n", Reasons: []string{"destructive"}, Wait: time.Minute, Redacted: `{"s":"x"}`}
}

// ask puts q through room for a, on a goroutine, and returns what put returns on a channel.
func ask(ctx context.Context, room *Room, a *Asking, q Question) <-chan reply {
	out := make(chan reply, 1)
	go func() {
		ans, err := room.put(ctx, a, q)
		out <- reply{ans, err}
	}()
	return out
}

// TestRoomAnswersFromEveryPath: a question is answered by the first of its paths, and that
// answer alone stands: through its Asker, by its own client's retry (Answer), by an operator
// in this process (Decide: at once) or in another (the store, seen by the poller); its pause
// is then decided and claimed once, and an Asker withdrawn says why. Read back from the store
// (QuestionOf), every question, a plan's and a proposal's too, is shown as it was put.
func TestRoomAnswersFromEveryPath(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func() *sqlite.Ledger {
		l, err := sqlite.Open(ctx, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	led := open()
	var notices []Entry
	var nmu sync.Mutex
	room := NewRoom(led, &RoomOptions{Poll: 20 * time.Millisecond, Notify: func(e Entry) { nmu.Lock(); notices = append(notices, e); nmu.Unlock() }})

	t.Run("through its asker", func(t *testing.T) {
		p := &person{action: Accept}
		r := <-ask(ctx, room, &Asking{Asker: p, Tenant: "t", Agent: "a"}, question())
		if r.err != nil || r.ans.Action != Accept || r.ans.By != "ann" {
			t.Fatalf("answer %+v, %v", r.ans, r.err)
		}
		pz, err := room.Kept(ctx, p.asked[0].ID)
		if err != nil || pz.Status != budget.ApprovalAccepted || !pz.Claimed || pz.View != "  s = \"x\"\n" || pz.Resumable {
			t.Errorf("its pause: %+v, %v", pz, err)
		}
		// Read back from the store, the pause is the question as it was put (a task's input
		// request, shown by any process: QuestionOf).
		if got := QuestionOf(pz); got.Message() != p.asked[0].Message() || got.ID != p.asked[0].ID {
			t.Errorf("the kept question reads\n%s\nnot as put:\n%s", got.Message(), p.asked[0].Message())
		}
	})
	t.Run("a plan and a proposal, read back", func(t *testing.T) {
		// A question asked whole reads back as put too: a plan's, not one call of run_code's.
		p := &person{action: Accept}
		a := &Asking{Asker: p, Room: room, Tenant: "t", Agent: "a", Timeout: time.Minute}
		plan := budget.Plan{ID: budget.NewID("p_"), Tenant: "t", Agent: "a", ExecutionID: "x", Effects: []budget.PlanEffect{{Seq: 1,
			Tool: "shop__refund", Arguments: json.RawMessage(`{"order_id":"o1"}`), StandIn: json.RawMessage("null"), View: "  order_id = \"o1\"\n"}}}
		if err := led.SavePlan(ctx, plan); err != nil {
			t.Fatal(err)
		}
		if d, fe := a.AskPlan(ctx, led, plan); d != Accepted || fe != nil {
			t.Fatalf("the plan: %v %v", d, fe)
		}
		if _, d, fe := a.AskSave(ctx, SaveProposal{Name: "lookup", Description: "finds an order", Code: "async def main(id: str):\n    return id\n"}); d != Accepted || fe != nil {
			t.Fatalf("the proposal: %v %v", d, fe)
		}
		for i, want := range []string{"Approve the plan " + plan.ID + "?", "Save the program lookup as a tool?"} {
			put := p.asked[i]
			pz, err := room.Kept(ctx, put.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got := QuestionOf(pz).Message(); got != put.Message() || !strings.HasPrefix(got, want) {
				t.Errorf("the kept question reads\n%s\nnot as put:\n%s", got, put.Message())
			}
		}
	})
	t.Run("by its own client", func(t *testing.T) {
		p := &person{put: make(chan Question, 1)}
		out := ask(ctx, room, &Asking{Asker: p, Hold: "h_1"}, question())
		q := <-p.put
		if _, err := room.Answer(ctx, q.ID, Answer{Action: Decline, By: "bob"}); err != nil {
			t.Fatal(err)
		}
		// Answer returns once the question is withdrawn: a retry is never shown it again.
		if c := p.causes(); len(c) != 1 || !errors.Is(c[0], ErrAnswered) {
			t.Errorf("withdrawn for %v, want ErrAnswered", c)
		}
		if r := <-out; r.err != nil || r.ans.Action != Decline || r.ans.By != "bob" {
			t.Errorf("answer %+v, %v", r.ans, r.err)
		}
		if _, err := room.Answer(ctx, q.ID, Answer{Action: Accept}); !errors.Is(err, budget.ErrAlreadyFinished) {
			t.Errorf("a second answer: %v, want ErrAlreadyFinished", err)
		}
	})
	t.Run("by an operator here", func(t *testing.T) {
		p := &person{put: make(chan Question, 1)}
		out := ask(ctx, room, &Asking{Asker: p, Hold: "h_2"}, question())
		q := <-p.put
		if _, err := room.Decide(ctx, q.ID, true, "operator ann"); err != nil {
			t.Fatal(err)
		}
		if r := <-out; r.err != nil || r.ans.Action != Accept || r.ans.By != "operator ann" {
			t.Errorf("answer %+v, %v", r.ans, r.err)
		}
		if c := p.causes(); len(c) != 1 || !errors.Is(c[0], ErrAnsweredElsewhere) {
			t.Errorf("withdrawn for %v, want ErrAnsweredElsewhere", c)
		}
	})
	t.Run("by another process", func(t *testing.T) {
		other := open()
		p := &person{put: make(chan Question, 1)}
		out := ask(ctx, room, &Asking{Asker: p, Hold: "h_3"}, question())
		q := <-p.put
		start := time.Now()
		if _, err := Decide(ctx, other, q.ID, false, "operator cli"); err != nil {
			t.Fatal(err)
		}
		r := <-out
		if r.err != nil || r.ans.Action != Decline || time.Since(start) > gate.Scaled(5*time.Second) {
			t.Errorf("answer %+v, %v after %v", r.ans, r.err, time.Since(start))
		}
		if c := p.causes(); len(c) != 1 || !errors.Is(c[0], ErrAnsweredElsewhere) {
			t.Errorf("withdrawn for %v, want ErrAnsweredElsewhere", c)
		}
		// Claimed here: another process cannot carry the call on as well.
		if err := other.ClaimPause(ctx, q.ID); !errors.Is(err, budget.ErrAlreadyFinished) {
			t.Errorf("claimed again elsewhere: %v", err)
		}
	})
	t.Run("claimed by another process first", func(t *testing.T) {
		// What a process that found this one's ledger owner gone does, answer and claim,
		// done before this Room looks (it polls hourly, and is woken by hand).
		slow := NewRoom(led, &RoomOptions{Poll: time.Hour})
		p := &person{put: make(chan Question, 1)}
		out := ask(ctx, slow, &Asking{Asker: p, Hold: "h_4"}, question())
		q := <-p.put
		if _, err := open().DecidePause(ctx, q.ID, budget.ApprovalAccepted, "x"); err != nil {
			t.Fatal(err)
		}
		if err := led.ClaimPause(ctx, q.ID); err != nil {
			t.Fatal(err)
		}
		slow.poke(q.ID)
		if r := <-out; r.err == nil {
			t.Errorf("answer %+v; want the call not carried on here", r.ans)
		}
		if c := p.causes(); len(c) != 1 || !errors.Is(c[0], ErrClaimedElsewhere) {
			t.Errorf("withdrawn for %v, want ErrClaimedElsewhere", c)
		}
	})
	nmu.Lock()
	if len(notices) != 6 || notices[0].Tool != "up__wipe" || notices[0].Status != "pending" || notices[0].Arguments != "  s = \"x\"\n" {
		t.Errorf("notices %+v; want one per question, pending, with its view", notices)
	}
	nmu.Unlock()
}

// TestRoomWaitEnds: a question whose wait lapses is dropped, and so is one no other process
// could carry on when its wait is cancelled; a held one cancelled is kept for a retry or an
// operator. A memory Room works the same way.
func TestRoomWaitEnds(t *testing.T) {
	led, err := sqlite.Open(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	for _, room := range []*Room{NewRoom(led, nil), NewRoom(nil, nil)} {
		for _, tc := range []struct {
			name   string
			hold   string
			cancel bool
			kept   bool
		}{
			{name: "lapsed", hold: "h_1"},
			{name: "cancelled in place", cancel: true},
			{name: "cancelled, held", hold: "h_2", cancel: true, kept: true},
		} {
			p := &person{put: make(chan Question, 1)}
			// A wait that lapses ends at its deadline; one cancelled must be cancelled before
			// its deadline, however slow the machine (a deadline passed first is a lapse).
			wait := 100 * time.Millisecond
			if tc.cancel {
				wait = gate.Scaled(time.Minute)
			}
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			out := ask(ctx, room, &Asking{Asker: p, Hold: tc.hold}, question())
			q := <-p.put
			if tc.cancel {
				cancel()
			}
			r := <-out
			cancel()
			if r.err == nil {
				t.Errorf("%s: answered %+v", tc.name, r.ans)
			}
			_, err := room.Kept(context.Background(), q.ID)
			if kept := err == nil; kept != tc.kept {
				t.Errorf("%s: kept %v (%v), want %v", tc.name, kept, err, tc.kept)
			}
		}
	}
}

// TestMemoryPauses: the pauses of a Room without a ledger are answered once and claimed once,
// listed while pending, and dropped once expired.
func TestMemoryPauses(t *testing.T) {
	ctx := context.Background()
	m := newMemory()
	now := time.Now()
	for _, p := range []budget.Pause{
		{ID: "q_1", Tenant: "t", AskedAt: now, Expires: now.Add(time.Hour)},
		{ID: "q_old", Tenant: "t", AskedAt: now.Add(-time.Hour), Expires: now.Add(-time.Minute)},
	} {
		if err := m.SavePause(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.SavePause(ctx, budget.Pause{ID: "q_2", AskedAt: now.Add(time.Second), Expires: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Pause(ctx, "q_old"); !errors.Is(err, budget.ErrNotFound) {
		t.Errorf("an expired pause outlived the next save: %v", err)
	}
	if err := m.ClaimPause(ctx, "q_1"); !errors.Is(err, budget.ErrAlreadyFinished) {
		t.Errorf("claimed while pending: %v", err)
	}
	if _, err := m.DecidePause(ctx, "q_1", budget.ApprovalAccepted, "ann"); err != nil {
		t.Fatal(err)
	}
	if p, err := m.DecidePause(ctx, "q_1", budget.ApprovalDeclined, "bob"); !errors.Is(err, budget.ErrAlreadyFinished) || p.AnsweredBy != "ann" {
		t.Errorf("a second answer: %+v, %v", p, err)
	}
	if err := m.ClaimPause(ctx, "q_1"); err != nil {
		t.Fatal(err)
	}
	if err := m.ClaimPause(ctx, "q_1"); !errors.Is(err, budget.ErrAlreadyFinished) {
		t.Errorf("claimed twice: %v", err)
	}
	if list, err := List(ctx, m, ""); err != nil || len(list) != 1 || list[0].ID != "q_2" || list[0].NotShown == "" {
		t.Errorf("pending: %+v, %v", list, err)
	}
	if err := m.SavePause(ctx, budget.Pause{ID: "q_3", Tenant: "u", Run: "named:r", AskedAt: now.Add(2 * time.Second), Expires: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if list, err := List(ctx, m, "u"); err != nil || len(list) != 1 || list[0].ID != "q_3" {
		t.Errorf("pending of tenant u: %+v, %v", list, err)
	}
	if ps, err := m.PendingPauses(ctx, "", "named:r"); err != nil || len(ps) != 1 || ps[0].ID != "q_3" {
		t.Errorf("pending of run named:r: %+v, %v", ps, err)
	}
	if ps, err := m.PendingPauses(ctx, "", ""); err != nil || len(ps) != 2 || ps[0].ID != "q_2" || ps[1].ID != "q_3" {
		t.Errorf("pending of all: %+v, %v", ps, err)
	}
}
