package ledgertest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

// contractCassettes: a ledger keeps each execution's cassette as bytes, finds it by execution
// and by Run (Runs keyed by tenant), replaces it when kept again, and a sweep removes those
// kept before its cutoff, each once however many sweeps run at once; other (a second opener
// of the same store, or l itself) sees what l kept.
func contractCassettes(t *testing.T, cl, co budget.Ledger) {
	ctx := t.Context()
	run := budget.RunRef{Tenant: "t", ID: "r"}
	elsewhere := budget.RunRef{Tenant: "u", ID: "r"}
	before := time.Now().Add(-time.Hour)
	var want []budget.Cassette
	for i := range 3 {
		c := budget.Cassette{ExecutionID: fmt.Sprintf("x%d", i), Run: run, Data: fmt.Appendf(nil, "{\"cassette\":1,\"n\":%d}\n\x00\xff", i)}
		if err := cl.PutCassette(ctx, c); err != nil {
			t.Fatal(err)
		}
		want = append(want, c)
	}
	if err := cl.PutCassette(ctx, budget.Cassette{ExecutionID: "y", Run: elsewhere, Data: []byte("other tenant")}); err != nil {
		t.Fatal(err)
	}
	want[1].Data = []byte("kept again")
	if err := cl.PutCassette(ctx, want[1]); err != nil {
		t.Fatal(err)
	}
	ignoreTime := cmpopts.IgnoreFields(budget.Cassette{}, "RecordedAt")
	got, err := co.Cassette(ctx, "x1")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want[1], got, ignoreTime); d != "" {
		t.Errorf("Cassette(x1) (-want +got):\n%s", d)
	}
	if got.RecordedAt.Before(before) {
		t.Errorf("RecordedAt %v, want about now", got.RecordedAt)
	}
	if _, err := co.Cassette(ctx, "nope"); !errors.Is(err, budget.ErrNotFound) {
		t.Errorf("Cassette(unknown) = %v, want ErrNotFound", err)
	}
	all, err := co.RunCassettes(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	sortByID := cmpopts.SortSlices(func(a, b budget.Cassette) bool { return a.ExecutionID < b.ExecutionID })
	if d := cmp.Diff(want, all, ignoreTime, sortByID); d != "" {
		t.Errorf("RunCassettes (-want +got):\n%s", d)
	}
	if none, err := co.RunCassettes(ctx, budget.RunRef{Tenant: "t", ID: "none"}); err != nil || none == nil || len(none) != 0 {
		t.Errorf("RunCassettes(a Run with none) = %v, %v; want an empty list", none, err)
	}

	if n, err := co.SweepCassettes(ctx, before); err != nil || n != 0 {
		t.Errorf("a sweep of those kept before any was = %d, %v; want 0 removed", n, err)
	}
	// Two sweeps at once, from both openers: every cassette removed, each counted once.
	cutoff := time.Now().Add(time.Hour)
	var wg sync.WaitGroup
	var mu sync.Mutex
	removed := 0
	for _, s := range []budget.Cassettes{cl, co} {
		wg.Go(func() {
			n, err := s.SweepCassettes(ctx, cutoff)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			removed += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if removed != 4 {
		t.Errorf("sweeps removed %d cassettes together, want 4", removed)
	}
	if _, err := cl.Cassette(ctx, "x0"); !errors.Is(err, budget.ErrNotFound) {
		t.Errorf("a swept cassette: %v, want ErrNotFound", err)
	}
}
