package budget

import (
	"context"
	"time"
)

// ShapeKey names what an observed shape belongs to: a tenant's view of one upstream tool as
// defined (Definition, a hash of the tool's definition as listed: a changed definition is
// another key). One tenant's key never reaches another's records.
type ShapeKey struct {
	Tenant, Upstream, Tool, Definition string
}

// ObservedShape is what the ledger keeps of the results of one tool without an output schema
// (docs/design.md §3.3): the summary of their shape (JSON that package upstream writes and
// reads; the ledger only holds it, and it holds no value of a result) and how many results
// it summarises.
type ObservedShape struct {
	Key     ShapeKey
	Samples int
	Shape   []byte
	// UpdatedAt is set by the ledger: when the shape was last merged.
	UpdatedAt time.Time
}

// MaxObservedShapes bounds the shapes a ledger keeps per tenant: adding one past it removes
// the tenant's least recently merged.
const MaxObservedShapes = 1024

// ObservedShapes is the part of a ledger that keeps the shapes of tools' results, so that
// what one process learned survives it and every replica on the ledger shares it: a part of
// Ledger. Safe for concurrent use, by several processes sharing the ledger.
type ObservedShapes interface {
	// ObservedShape returns what is kept for key, or ErrNotFound.
	ObservedShape(ctx context.Context, key ShapeKey) (ObservedShape, error)
	// MergeObservedShape replaces what is kept for key by what merge makes of it (of the
	// zero ObservedShape, Key set, when nothing is) and returns what it kept. Merges of one
	// key are serialised across goroutines and processes: each sees what the one before
	// kept, so samples added by replicas at once all count. merge may run more than once
	// (a transaction run again) and must have no other effect; its error ends the merge,
	// keeping nothing. Adding a tenant's key past MaxObservedShapes removes its least
	// recently merged (merges racing to add keys may leave a few more until the next).
	MergeObservedShape(ctx context.Context, key ShapeKey, merge func(old ObservedShape) (ObservedShape, error)) (ObservedShape, error)
}
