package budget

import (
	"context"
	"encoding/json"
	"time"
)

// SavedProgram is a program saved under a name as a tool of its tenant's agents
// (docs/design.md §23): its text, whose hash is its version, and the input schema its main's
// signature gives.
type SavedProgram struct {
	Tenant string `json:"tenant"`
	// Agent, when not empty, is the one agent of the tenant it is offered to; "" offers it to
	// every agent of the tenant that runs code.
	Agent       string          `json:"agent,omitempty"`
	Name        string          `json:"name"`
	Version     string          `json:"version"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Code        string          `json:"code"`
	SavedBy     string          `json:"saved_by"`
	SavedAt     time.Time       `json:"saved_at"` // set by the ledger
}

// ProgramRun records that an execution ran a saved program's version.
type ProgramRun struct {
	ExecutionID string    `json:"execution_id"`
	Name        string    `json:"name"`
	Version     string    `json:"version"`
	At          time.Time `json:"at"` // set by the ledger
}

// Programs keep a tenant's saved programs: a part of Ledger, so every replica serves the same.
// Safe for concurrent use, by several processes sharing the ledger.
type Programs interface {
	// PutProgram saves p under its tenant and name, replacing what was saved there (the old
	// version answers until it is replaced).
	PutProgram(ctx context.Context, p SavedProgram) error
	// SavedProgram returns tenant's program name, or ErrNotFound.
	SavedProgram(ctx context.Context, tenant, name string) (SavedProgram, error)
	// SavedPrograms returns tenant's programs by name; none is an empty list.
	SavedPrograms(ctx context.Context, tenant string) ([]SavedProgram, error)
	// DeleteProgram removes tenant's program name; ErrNotFound when there is none.
	DeleteProgram(ctx context.Context, tenant, name string) error
	// NoteProgramRun records that execution r.ExecutionID of tenant ran r.Name at r.Version.
	NoteProgramRun(ctx context.Context, tenant string, r ProgramRun) error
	// ProgramRuns returns the executions of tenant that ran program name, oldest first.
	ProgramRuns(ctx context.Context, tenant, name string) ([]ProgramRun, error)
}
