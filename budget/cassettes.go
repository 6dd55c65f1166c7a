package budget

import (
	"context"
	"time"
)

// Cassette is the cassette of one execution as the ledger keeps it (package cassette writes
// and reads the bytes; the ledger only holds them): recorded by the server that ran the
// execution, exported by `mcp-sandbox export` from any process on the same ledger.
type Cassette struct {
	ExecutionID string
	Run         RunRef
	// Data is the cassette's JSON Lines, already redacted: the ledger stores it as it is.
	Data       []byte
	RecordedAt time.Time // set by the ledger
}

// Cassettes is the part of a Ledger that keeps executions' cassettes; what needs only it (the
// cassette keeper, export) takes it. Safe for concurrent use, by several processes sharing
// the ledger.
type Cassettes interface {
	// PutCassette keeps c; keeping a second cassette for one execution replaces the first.
	PutCassette(ctx context.Context, c Cassette) error
	// Cassette returns the cassette of one execution, or ErrNotFound.
	Cassette(ctx context.Context, executionID string) (Cassette, error)
	// RunCassettes returns the cassettes of a Run's executions in the order they were kept;
	// none is an empty list, not an error.
	RunCassettes(ctx context.Context, run RunRef) ([]Cassette, error)
	// SweepCassettes removes every cassette kept before cutoff and returns how many it
	// removed. Sweeps running at once remove and count each cassette once.
	SweepCassettes(ctx context.Context, cutoff time.Time) (int, error)
}
