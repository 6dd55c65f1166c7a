package upstream

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// ShapeKey names a tool's observed shape in a ShapeStore: the server, the tool's name there
// and the sha256 of its definition as listed (a changed definition is another key).
type ShapeKey struct {
	Server, Tool, Definition string
}

// ShapeStore keeps one tenant's observed shapes beyond this process, so that they survive a
// restart and every replica sharing the store adds to the same ones (cmd binds the ledger's
// records, budget.ObservedShapes, to the Pool's tenant: a store never holds another
// tenant's). A summary is JSON this package writes (a shape and its drift, never a value);
// the store only holds it. Safe for concurrent use.
type ShapeStore interface {
	// LoadShape returns the samples and summary kept for key; found is false when none is.
	LoadShape(ctx context.Context, key ShapeKey) (samples int, summary []byte, found bool, err error)
	// MergeShape replaces what is kept for key by what merge makes of it (0 and nil when
	// nothing is), and returns what it kept. Merges of one key are serialised, across
	// processes too, each seeing what the one before kept. merge may run more than once and
	// must have no other effect.
	MergeShape(ctx context.Context, key ShapeKey, merge func(samples int, summary []byte) (int, []byte, error)) (samples int, summary []byte, err error)
}

// Bounds of the store's side.
const (
	// maxPending bounds the samples waiting to be merged into the store; past it a sample
	// is folded into the last one waiting for the same tool (standing for both), or, when
	// none is, left to the cache alone.
	maxPending = 256
	// storeTimeout bounds one merge of the pending samples, and the load of get_tool_info.
	storeTimeout = 10 * time.Second
	// maxSummaryBytes bounds a summary read from the store.
	maxSummaryBytes = 1 << 20
	// flushPause is the least time between two merges of the flusher. A sample waits for the
	// store at most this long (get_tool_info in this process merges what is pending first,
	// and Close merges the rest); a replica sees another's samples that much later, and a
	// process that dies loses at most that long's samples (they are statistics, not records).
	// A merge is a store transaction, which each binding call paid for (issue 27).
	flushPause = time.Second
)

// pendingSample is one sample (or, past maxPending, several folded) waiting for the store.
type pendingSample struct {
	tool  *Tool
	shape *shape
	n     int
}

func storeKey(t *Tool) ShapeKey {
	return ShapeKey{Server: t.Server, Tool: t.Upstream, Definition: t.digest}
}

// queue adds sample s of t to what the flusher merges into the store next. o.mu is held.
func (o *observations) queue(t *Tool, s *shape) {
	if len(o.pending) >= maxPending {
		key := toolKey(t)
		for i := len(o.pending) - 1; i >= 0; i-- {
			if p := &o.pending[i]; toolKey(p.tool) == key {
				p.shape = fold(p.shape, s, "", nil)
				if p.shape.size > shapeNodes {
					p.shape = bounded(p.shape, shapeNodes)
				}
				p.n++
				return
			}
		}
		return // the cache has it; the store does not (see maxPending)
	}
	o.pending = append(o.pending, pendingSample{tool: t, shape: s, n: 1})
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// startStore makes store the one o's samples are merged into. The flusher it returns merges
// pending samples as they come, until stop is closed, and then what is left; Pool runs it.
func (o *observations) startStore(store ShapeStore, log *slog.Logger) (flusher func()) {
	o.store, o.log = store, log
	o.wake, o.stop, o.turn = make(chan struct{}, 1), make(chan struct{}), make(chan struct{}, 1)
	o.stopped = make(chan struct{})
	return func() {
		defer close(o.stopped)
		pause := time.NewTimer(0)
		defer pause.Stop()
		for {
			select {
			case <-o.wake:
				o.flushBounded()
			case <-o.stop:
				o.flushBounded()
				return
			}
			// What comes within flushPause of a merge waits for the next one: a program's
			// loop of calls is then a merge a pause, not a store transaction a call.
			pause.Reset(cmp.Or(o.pause, flushPause))
			select {
			case <-pause.C:
			case <-o.stop:
				o.flushBounded()
				return
			}
		}
	}
}

// closeStore stops the flusher, which merges what is pending first, and waits for it up to
// storeTimeout and grace: a Pool's samples are kept however long its sessions took to close.
func (o *observations) closeStore(grace time.Duration) bool {
	if o.stop == nil {
		return true
	}
	close(o.stop)
	select {
	case <-o.stopped:
		return true
	case <-time.After(storeTimeout + grace):
		return false
	}
}

// flushBounded merges what is pending on a context of its own: a flush under way when the
// Pool closes still completes (a closing Pool's samples are kept).
func (o *observations) flushBounded() {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	o.flush(ctx)
}

// flush merges every pending sample into the store, in the order they came, one merge per
// tool, and refreshes the cache with what the store keeps. It returns once the samples
// pending when it was called are merged (or failed to be): a flush under way is waited for.
func (o *observations) flush(ctx context.Context) {
	select {
	case o.turn <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-o.turn }()
	o.mu.Lock()
	pending := o.pending
	o.pending = nil
	o.mu.Unlock()
	var order []string
	byTool := map[string][]pendingSample{}
	for _, p := range pending {
		k := toolKey(p.tool)
		if byTool[k] == nil {
			order = append(order, k)
		}
		byTool[k] = append(byTool[k], p)
	}
	for _, k := range order {
		samples := byTool[k]
		t := samples[0].tool
		n, summary, err := o.store.MergeShape(ctx, storeKey(t), func(n int, summary []byte) (int, []byte, error) {
			e, err := decodeSummary(n, summary)
			if err != nil {
				return 0, nil, err
			}
			for _, p := range samples {
				e.add(p.shape.clone(), p.n) // a clone: merge may run again
			}
			return e.samples, e.summary(), nil
		})
		if err != nil {
			o.log.Warn("observed result shapes not kept in the ledger: get_tool_info answers from this process's own",
				"server", t.Server, "tool", t.Upstream, "samples", len(samples), "err", err)
			continue
		}
		o.cache(t, n, summary)
	}
}

// refresh, with a store, merges what is pending and loads what the store keeps of t into
// the cache (the cache alone answers when the store fails).
func (o *observations) refresh(ctx context.Context, t *Tool) {
	if o.store == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	o.flush(ctx)
	n, summary, found, err := o.store.LoadShape(ctx, storeKey(t))
	switch {
	case err != nil:
		o.log.Warn("observed result shapes could not be read from the ledger: get_tool_info answers from this process's own",
			"server", t.Server, "tool", t.Upstream, "err", err)
	case found:
		o.cache(t, n, summary)
	}
}

// cache makes what the store keeps of t the cached one.
func (o *observations) cache(t *Tool, n int, summary []byte) {
	e, err := decodeSummary(n, summary)
	if err != nil {
		o.log.Warn("an observed result shape in the ledger is unreadable; it is not used", "server", t.Server, "tool", t.Upstream, "err", err)
		return
	}
	key := toolKey(t)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.tools == nil {
		o.tools = map[string]*observed{}
	}
	if o.tools[key] == nil && len(o.tools) >= maxObserved {
		o.evict()
	}
	o.clock++
	e.used = o.clock
	o.tools[key] = e
}

// clone returns a copy of s sharing nothing with it.
func (s *shape) clone() *shape {
	if s == nil {
		return nil
	}
	c := *s
	c.items, c.dict = s.items.clone(), s.dict.clone()
	c.fields = nil
	for _, f := range s.fields {
		c.fields = append(c.fields, &field{name: f.name, shape: f.shape.clone(), seen: f.seen})
	}
	return &c
}

// summaryVersion is the format of a summary; a summary of another is not read.
const summaryVersion = 1

// summaryJSON is a summary as kept: the shape and its drift. Nothing in it is a value of a
// result: JSON types as a bit set (kinds), object keys, counts.
type summaryJSON struct {
	V     int        `json:"v"`
	Shape *shapeJSON `json:"shape"`
	Drift []string   `json:"drift"`
}

type shapeJSON struct {
	Kinds   kinds       `json:"kinds,omitempty"`
	Any     bool        `json:"any,omitempty"`
	Items   *shapeJSON  `json:"items,omitempty"`
	Fields  []fieldJSON `json:"fields,omitempty"`
	Objects int         `json:"objects,omitempty"`
	Dict    *shapeJSON  `json:"dict,omitempty"`
}

type fieldJSON struct {
	Name  string     `json:"name"`
	Shape *shapeJSON `json:"shape"`
	Seen  int        `json:"seen"`
}

func (s *shape) toJSON() *shapeJSON {
	if s == nil {
		return nil
	}
	j := &shapeJSON{Kinds: s.kinds, Any: s.any, Items: s.items.toJSON(), Objects: s.objects, Dict: s.dict.toJSON()}
	for _, f := range s.fields {
		j.Fields = append(j.Fields, fieldJSON{Name: f.name, Shape: f.shape.toJSON(), Seen: f.seen})
	}
	return j
}

var errSummary = errors.New("not a shape summary")

// fromJSON is the shape j describes; depth bounds how deep it may nest.
func (j *shapeJSON) fromJSON(depth int) (*shape, error) {
	if j == nil {
		return nil, nil
	}
	if depth > shapeDepth+1 || j.Kinds >= kObject<<1 || j.Objects < 0 {
		return nil, errSummary
	}
	s := &shape{kinds: j.Kinds, any: j.Any, objects: j.Objects}
	var err error
	if s.items, err = j.Items.fromJSON(depth + 1); err != nil {
		return nil, err
	}
	if s.dict, err = j.Dict.fromJSON(depth + 1); err != nil {
		return nil, err
	}
	if len(j.Fields) > shapeKeys {
		return nil, errSummary
	}
	for _, f := range j.Fields {
		fs, err := f.Shape.fromJSON(depth + 1)
		if err != nil || fs == nil || f.Seen < 0 || len(f.Name) > shapeKeyBytes || s.field(f.Name) != nil {
			return nil, errSummary
		}
		s.fields = append(s.fields, &field{name: f.Name, shape: fs, seen: f.Seen})
	}
	return s.resize(), nil
}

// summary is e as kept in the store.
func (e *observed) summary() []byte {
	b, _ := json.Marshal(summaryJSON{V: summaryVersion, Shape: e.shape.toJSON(), Drift: e.drift})
	return b
}

// decodeSummary reads what the store keeps: samples results, summarised; nothing (0, empty)
// is nothing seen yet.
func decodeSummary(samples int, summary []byte) (*observed, error) {
	if samples == 0 && len(summary) == 0 {
		return &observed{}, nil
	}
	if samples < 0 || len(summary) > maxSummaryBytes {
		return nil, errSummary
	}
	dec := json.NewDecoder(bytes.NewReader(summary))
	dec.DisallowUnknownFields()
	var j summaryJSON
	if err := dec.Decode(&j); err != nil {
		return nil, fmt.Errorf("%w: %v", errSummary, err)
	}
	if j.V != summaryVersion {
		return nil, fmt.Errorf("%w: version %d, this binary reads %d", errSummary, j.V, summaryVersion)
	}
	s, err := j.Shape.fromJSON(0)
	if err != nil {
		return nil, err
	}
	if s.nodes() > shapeNodes {
		s = bounded(s, shapeNodes)
	}
	if len(j.Drift) > maxDrift {
		j.Drift = j.Drift[len(j.Drift)-maxDrift:]
	}
	return &observed{shape: s, samples: samples, drift: j.Drift}, nil
}
