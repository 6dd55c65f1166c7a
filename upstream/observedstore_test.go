package upstream

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// memShapes is a ShapeStore in memory that serialises merges as the ledgers do; twice, it
// runs every merge twice, keeping the second (as a transaction run again does); failing
// fails everything.
type memShapes struct {
	mu      sync.Mutex
	kept    map[ShapeKey]memShape
	twice   bool
	failing bool
	merges  int
}

type memShape struct {
	n       int
	summary []byte
}

var errStoreDown = errors.New("the store is down")

func (m *memShapes) LoadShape(ctx context.Context, key ShapeKey) (int, []byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failing {
		return 0, nil, false, errStoreDown
	}
	k, ok := m.kept[key]
	return k.n, k.summary, ok, nil
}

func (m *memShapes) MergeShape(ctx context.Context, key ShapeKey, merge func(int, []byte) (int, []byte, error)) (int, []byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failing {
		return 0, nil, errStoreDown
	}
	old := m.kept[key]
	if m.twice {
		if _, _, err := merge(old.n, old.summary); err != nil {
			return 0, nil, err
		}
	}
	n, s, err := merge(old.n, old.summary)
	if err != nil {
		return 0, nil, err
	}
	if m.kept == nil {
		m.kept = map[ShapeKey]memShape{}
	}
	m.kept[key] = memShape{n, s}
	m.merges++
	return n, s, nil
}

// replica is the observations of one process on store. Its flusher is not run: the test
// merges what is pending when it says (flush, or a get_tool_info), so several samples are
// merged at once (the Pool's flusher: TestObservedStorePoolClose).
func replica(store ShapeStore) *observations {
	o := &observations{}
	o.startStore(store, slog.New(slog.DiscardHandler))
	return o
}

// TestObservedStoreShared: replicas on one store add up their samples (a merge run twice
// counts once) once each has merged them, a replica started afresh (a restart) answers with what the store keeps, and
// drift is reckoned on the merged type, whichever replica saw the result.
func TestObservedStoreShared(t *testing.T) {
	store := &memShapes{twice: true}
	tool := stubTool(t, "s__order", `{"type":"object"}`, "")
	a, b := replica(store), replica(store)
	a.observe(tool, []byte(`{"id":"a","total":1,"items":[{"sku":"A"}]}`))
	b.observe(tool, []byte(`{"id":"b","total":2,"items":[],"note":"n"}`))
	a.observe(tool, []byte(`{"id":"c","total":3,"items":[{"sku":"B","qty":2}]}`))
	var mem observations // what one process that saw all three, in the order merged, learns
	for _, r := range []string{`{"id":"a","total":1,"items":[{"sku":"A"}]}`, `{"id":"c","total":3,"items":[{"sku":"B","qty":2}]}`,
		`{"id":"b","total":2,"items":[],"note":"n"}`} {
		mem.observe(tool, []byte(r))
	}
	wantOT, want := observedSchema(t, &mem, tool)
	// A replica's get_tool_info merges its own pending samples only: both are merged first,
	// as each one's flusher would.
	a.flush(t.Context())
	b.flush(t.Context())
	if _, summary, _, _ := store.LoadShape(t.Context(), storeKey(tool)); string(summary) != string(mem.tools[toolKey(tool)].summary()) {
		t.Errorf("the store keeps\n%s\nwant what one process learns\n%s", summary, mem.tools[toolKey(tool)].summary())
	}
	for name, o := range map[string]*observations{"a": a, "b": b, "a restarted": replica(store)} {
		ot, got := observedSchema(t, o, tool)
		if d := cmp.Diff(wantOT, ot); d != "" {
			t.Errorf("replica %s: output type (-want +got):\n%s", name, d)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("replica %s: schema (-want +got):\n%s", name, d)
		}
	}

	b.observe(tool, []byte(`{"id":"d","total":"4","items":[]}`))
	b.flush(t.Context())
	ot, _ := observedSchema(t, a, tool)
	if ot.Samples != 4 || len(ot.Drift) != 1 || !strings.HasPrefix(ot.Drift[0], "result 4: result.total: str, where earlier results had int") {
		t.Errorf("a's view of b's changed result: %+v", ot)
	}
	other := stubTool(t, "s__order", `{"type":"object","properties":{"x":{"type":"string"}}}`, "")
	if ot, _ := a.outputType(t.Context(), other); ot.Samples != 0 {
		t.Errorf("another definition of the tool shares its samples: %+v", ot)
	}
}

// TestObservedStoreDown: with the store failing, a process answers from its own samples.
func TestObservedStoreDown(t *testing.T) {
	store := &memShapes{failing: true}
	tool := stubTool(t, "s__tool", `{"type":"object"}`, "")
	o := replica(store)
	for range ObservedAfter {
		o.observe(tool, []byte(`{"a":1}`))
	}
	if ot, raw := o.outputType(t.Context(), tool); ot.Source != OutputObserved || ot.Samples != ObservedAfter || raw == nil {
		t.Errorf("with the store down: %+v %s", ot, raw)
	}
}

// TestObservedStorePoolClose: a Pool's samples not yet merged when it closes are merged
// before Close returns.
func TestObservedStorePoolClose(t *testing.T) {
	store := &memShapes{}
	p, err := NewPool(&PoolOptions{Shapes: store, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	tool := stubTool(t, "s__tool", `{"type":"object"}`, "")
	for range 5 {
		p.observed.observe(tool, []byte(`{"a":1}`))
	}
	p.Close()
	n, summary, found, _ := store.LoadShape(t.Context(), storeKey(tool))
	if !found || n != 5 {
		t.Fatalf("after Close the store keeps %d samples (found %v), want 5", n, found)
	}
	if _, err := decodeSummary(n, summary); err != nil {
		t.Errorf("what Close merged: %v", err)
	}
}

// TestObservedStorePaced: samples that come while the flusher pauses after a merge wait and
// are merged together, so a loop of calls is not a store transaction a call; none is lost.
// The pause here outlasts the test, so at most two merges happen however the goroutines run:
// the one the first sample wakes (of what is pending then) and the one Close makes.
func TestObservedStorePaced(t *testing.T) {
	store := &memShapes{}
	o := &observations{pause: time.Hour}
	flusher := o.startStore(store, slog.New(slog.DiscardHandler))
	done := make(chan struct{})
	go func() { defer close(done); flusher() }()
	tool := stubTool(t, "s__tool", `{"type":"object"}`, "")
	const results = 50
	for range results {
		o.observe(tool, []byte(`{"a":1}`))
	}
	if !o.closeStore(0) {
		t.Fatal("the flusher did not stop")
	}
	<-done
	n, _, _, _ := store.LoadShape(t.Context(), storeKey(tool))
	if n != results || store.merges > 2 {
		t.Errorf("the store keeps %d samples after %d merges, want %d after at most 2", n, store.merges, results)
	}
}

// TestObservedSummary: a shape read back from its summary is the same type, for every case
// of TestObservedTypes; a summary that is not one is refused.
func TestObservedSummary(t *testing.T) {
	for _, results := range [][]string{
		{`{"id":"x","n":1,"tags":[]}`, `{"id":"y","n":2.5,"tags":["t"],"note":null}`, `{"id":"z","n":3,"tags":["u"],"note":"s"}`},
		{`[{"sku":"A","qty":1},{"sku":"B"}]`, `[]`, `[{"sku":"C","qty":2,"gift":true}]`},
		{`{"total":1,"note":"a"}`, `{"total":2,"note":"b"}`, `{"total":3,"note":"c"}`, `{"total":"4.00","currency":"EUR"}`},
		{`{"2024-01-01":{"n":1}}`, `{"` + strings.Repeat("k", 70) + `":{"n":2}}`, `{"2024-01-03":{"n":3}}`},
		{strings.Repeat(`{"a":[`, 10) + "1" + strings.Repeat("]}", 10), `"x"`, `null`},
	} {
		tool := stubTool(t, "s__tool", `{"type":"object"}`, "")
		var o observations
		for _, r := range results {
			o.observe(tool, []byte(r))
		}
		e := o.tools[toolKey(tool)]
		summary := e.summary()
		for _, v := range []string{"EUR", "4.00", "2.5", "gift\":true", "\"x\""} {
			if strings.Contains(string(summary), v) {
				t.Errorf("a value (%s) is in the summary: %s", v, summary)
			}
		}
		back, err := decodeSummary(e.samples, summary)
		if err != nil {
			t.Fatalf("%s: %v", summary, err)
		}
		var want, got bytes.Buffer
		e.shape.schema(&want)
		back.shape.schema(&got)
		if want.String() != got.String() || back.samples != e.samples || !cmp.Equal(back.drift, e.drift) || back.shape.size != e.shape.size {
			t.Errorf("read back:\n%s %d %q\nwant\n%s %d %q", got.String(), back.samples, back.drift, want.String(), e.samples, e.drift)
		}
	}
	for _, bad := range []string{`{}`, `{"v":2,"shape":{"kinds":1}}`, `{"v":1,"shape":{"kinds":1,"value":"secret"}}`,
		`{"v":1,"shape":{"kinds":255}}`, `{"v":1,"shape":{"kinds":64,"fields":[{"name":"a","shape":{"kinds":1},"seen":1},{"name":"a","shape":{"kinds":1},"seen":1}]}}`,
		`{"v":1,"shape":` + strings.Repeat(`{"kinds":32,"items":`, 12) + `{"kinds":1}` + strings.Repeat("}", 12) + `}`, `not json`} {
		if _, err := decodeSummary(1, []byte(bad)); err == nil {
			t.Errorf("decodeSummary(%s) took it", bad)
		}
	}
}
