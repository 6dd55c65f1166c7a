package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// The collector's setting serve and run apply when the operator set neither GOGC nor
// GOMEMLIMIT (docs/design.md §19): the collector was about a tenth of the server's CPU in a loop of
// binding calls at Go's default (GOGC=100), which collects each time the heap doubles a live
// heap of a few MiB. A heap may grow to five times its live size (gcPercent) while that
// stays under a soft limit (gcFloor) that keeps the server's memory where the README's
// rows measure it; past it, the limit follows the live heap at twice its size, so that a
// large live heap is never collected more often than the default would collect it (a fixed
// limit would make the collector run back to back as the live heap neared it). A one-shot
// `run` of a small program then never collects at all: at the default its one collection,
// about 20 ms into its start, stopped the world for a millisecond and took a core for eight
// while the child was being started (§19.10).
const (
	gcPercent = 400
	gcFloor   = 48 << 20
)

// gcApplies says whether serve and run set the collector: only when lookup (os.LookupEnv)
// finds neither GOGC nor GOMEMLIMIT in the environment. Either one present, even empty, is
// the operator's, and the runtime's reading of it stands.
func gcApplies(lookup func(string) (string, bool)) bool {
	_, gogc := lookup("GOGC")
	_, limit := lookup("GOMEMLIMIT")
	return !gogc && !limit
}

// gcMemoryLimit is the soft memory limit for a live heap of live bytes beside other bytes
// of the runtime's own (stacks, its metadata): the floor, or what Go's default would let the
// heap reach, whichever is more.
func gcMemoryLimit(live, other uint64) int64 {
	if other > math.MaxInt64 || live > (math.MaxInt64-other)/2 {
		return math.MaxInt64
	}
	return max(gcFloor, int64(2*live+other))
}

// startGC applies the collector setting when gcApplies, and returns what
// restores the runtime's own. The limit is revised after each collection, by a cleanup the
// runtime runs once the previous cycle's sentinel was collected: no goroutine of its own.
func startGC(lookup func(string) (string, bool)) (stop func()) {
	if !gcApplies(lookup) {
		return func() {}
	}
	return startGCTuner(nil)
}

// startGCTuner sets the collector and revises its limit after each collection; revised,
// when not nil, is called after each revision (a test's hook).
func startGCTuner(revised func()) (stop func()) {
	t := &gcTuner{revised: revised, samples: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}}
	percent := debug.SetGCPercent(gcPercent)
	limit := debug.SetMemoryLimit(gcFloor)
	t.arm()
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.stopped {
			return
		}
		t.stopped = true
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	}
}

// gcTuner revises the soft memory limit after each collection.
type gcTuner struct {
	mu      sync.Mutex // held while the limit is revised, so that none is set after stop
	stopped bool
	revised func()
	samples []metrics.Sample
}

// gcSentinel is what a collection frees: it holds a pointer, so the runtime does not batch
// it with other small objects (its cleanup would then wait for theirs).
type gcSentinel struct{ _ *byte }

func (t *gcTuner) arm() {
	runtime.AddCleanup(new(gcSentinel), (*gcTuner).collected, t)
}

// collected runs after a collection freed the sentinel: the limit follows the live heap, and
// a new sentinel waits for the next collection.
func (t *gcTuner) collected() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	metrics.Read(t.samples)
	v := func(i int) uint64 {
		if t.samples[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return t.samples[i].Value.Uint64()
	}
	heap := v(2) + v(3) + v(4) + v(5)
	other := uint64(0)
	if total := v(1); total > heap {
		other = total - heap
	}
	debug.SetMemoryLimit(gcMemoryLimit(v(0), other))
	t.arm()
	if t.revised != nil {
		t.revised()
	}
}
