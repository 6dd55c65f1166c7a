package ledgertest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
)

// addSample is a merge that adds one sample: the shape grows by one byte per sample, so a
// merge that did not see the one before it leaves the shape shorter than the count.
func addSample(old budget.ObservedShape) (budget.ObservedShape, error) {
	old.Samples++
	old.Shape = append(append([]byte(nil), old.Shape...), 's')
	return old, nil
}

// contractShapes: a ledger keeps an observed shape per tenant, upstream, tool and definition;
// a merge sees what the merge before it kept, so merges racing from l and other (a second
// opener of the same store, or l itself) all count; a merge that fails keeps nothing.
func contractShapes(t *testing.T, l, other budget.Ledger) {
	ctx := t.Context()
	sl, so := l, other
	key := budget.ShapeKey{Tenant: "t", Upstream: "support", Tool: "parcel", Definition: "d1"}
	if _, err := so.ObservedShape(ctx, key); !errors.Is(err, budget.ErrNotFound) {
		t.Fatalf("ObservedShape before any merge = %v, want ErrNotFound", err)
	}
	before := time.Now().Add(-time.Hour)
	kept, err := sl.MergeObservedShape(ctx, key, func(old budget.ObservedShape) (budget.ObservedShape, error) {
		if old.Key != key || old.Samples != 0 || len(old.Shape) != 0 {
			t.Errorf("the first merge saw %+v, want nothing kept under its key", old)
		}
		return budget.ObservedShape{Samples: 1, Shape: []byte(`{"k":["str"]}`)}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if kept.Key != key || kept.Samples != 1 || string(kept.Shape) != `{"k":["str"]}` || kept.UpdatedAt.Before(before) {
		t.Errorf("the first merge kept %+v", kept)
	}
	got, err := so.ObservedShape(ctx, key)
	if err != nil || got.Key != key || got.Samples != 1 || string(got.Shape) != `{"k":["str"]}` || !got.UpdatedAt.Equal(kept.UpdatedAt) {
		t.Errorf("ObservedShape = %+v, %v; want what the merge kept, %+v", got, err, kept)
	}

	// Every other part of the key is another record: another tenant's above all.
	for _, k := range []budget.ShapeKey{
		{Tenant: "u", Upstream: "support", Tool: "parcel", Definition: "d1"},
		{Tenant: "t", Upstream: "billing", Tool: "parcel", Definition: "d1"},
		{Tenant: "t", Upstream: "support", Tool: "order", Definition: "d1"},
		{Tenant: "t", Upstream: "support", Tool: "parcel", Definition: "d2"},
	} {
		if o, err := so.ObservedShape(ctx, k); !errors.Is(err, budget.ErrNotFound) {
			t.Errorf("ObservedShape(%+v) = %+v, %v; want ErrNotFound", k, o, err)
		}
		if _, err := sl.MergeObservedShape(ctx, k, func(old budget.ObservedShape) (budget.ObservedShape, error) {
			if old.Samples != 0 || len(old.Shape) != 0 {
				t.Errorf("a merge of %+v saw %+v, kept under another key", k, old)
			}
			return addSample(old)
		}); err != nil {
			t.Fatal(err)
		}
	}

	boom := errors.New("merge refused")
	failed := budget.ShapeKey{Tenant: "t", Upstream: "support", Tool: "failed", Definition: "d1"}
	if _, err := sl.MergeObservedShape(ctx, failed, func(budget.ObservedShape) (budget.ObservedShape, error) {
		return budget.ObservedShape{}, boom
	}); !errors.Is(err, boom) {
		t.Errorf("a failing merge = %v, want its error", err)
	}
	if _, err := so.ObservedShape(ctx, failed); !errors.Is(err, budget.ErrNotFound) {
		t.Errorf("a failed merge kept something: %v", err)
	}

	// Merges racing from both openers: every one counts.
	const goroutines, each = 8, 8
	var wg sync.WaitGroup
	for g := range goroutines {
		s := []budget.ObservedShapes{sl, so}[g%2]
		wg.Go(func() {
			for range each {
				if _, err := s.MergeObservedShape(ctx, key, addSample); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	got, err = sl.ObservedShape(ctx, key)
	want := 1 + goroutines*each
	if err != nil || got.Samples != want || len(got.Shape) != len(`{"k":["str"]}`)+goroutines*each {
		t.Errorf("after %d racing merges: %d samples, a shape of %d bytes (%v); want %d samples and every merge seeing the one before",
			goroutines*each, got.Samples, len(got.Shape), err, want)
	}
}

// contractShapeBound: a tenant keeps at most MaxObservedShapes; adding one past it removes the
// least recently merged, and only that tenant's.
func contractShapeBound(t *testing.T, l budget.Ledger) {
	ctx := t.Context()
	s := l
	key := func(tenant string, i int) budget.ShapeKey {
		return budget.ShapeKey{Tenant: tenant, Upstream: "s", Tool: fmt.Sprintf("t%d", i), Definition: strings.Repeat("d", 64)}
	}
	merge := func(k budget.ShapeKey) {
		t.Helper()
		if _, err := s.MergeObservedShape(ctx, k, addSample); err != nil {
			t.Fatal(err)
		}
	}
	merge(key("other", 0))
	merge(key("t", 0))
	merge(key("t", 1))
	// The rest of the tenant's bound, from several goroutines (the SQLite ledger commits them
	// in batches).
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				if _, err := s.MergeObservedShape(ctx, key("t", i), addSample); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for i := 2; i < budget.MaxObservedShapes; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	if _, err := s.ObservedShape(ctx, key("t", 0)); err != nil {
		t.Fatalf("with %d shapes kept, the first is gone: %v", budget.MaxObservedShapes, err)
	}
	merge(key("t", 1))                        // merged again: now among the most recent
	merge(key("t", budget.MaxObservedShapes)) // one past the bound
	if _, err := s.ObservedShape(ctx, key("t", 0)); !errors.Is(err, budget.ErrNotFound) {
		t.Errorf("one past the bound, the least recently merged is kept: %v", err)
	}
	for _, k := range []budget.ShapeKey{key("t", 1), key("t", 2), key("t", budget.MaxObservedShapes), key("other", 0)} {
		if o, err := s.ObservedShape(ctx, k); err != nil || o.Samples == 0 {
			t.Errorf("%+v: %+v, %v; want it kept", k, o, err)
		}
	}
}

// BenchmarkShapeMerge measures one merge of a sample into a kept shape of about 2 KB (a
// result with 40 keys), the store's work per result of a tool without an output schema;
// parallel merges of one key take turns, as replicas' do.
func BenchmarkShapeMerge(b *testing.B, l budget.Ledger) {
	s := l
	shape := []byte(`{"v":1,"shape":{"kinds":64,"fields":[` + strings.Repeat(`{"name":"a_key_name","shape":{"kinds":16},"seen":3},`, 39) +
		`{"name":"last","shape":{"kinds":4},"seen":3}],"objects":3},"drift":[]}`)
	key := budget.ShapeKey{Tenant: "t", Upstream: "s", Tool: "t", Definition: strings.Repeat("d", 64)}
	merge := func(old budget.ObservedShape) (budget.ObservedShape, error) {
		return budget.ObservedShape{Samples: old.Samples + 1, Shape: shape}, nil
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.MergeObservedShape(b.Context(), key, merge); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
