package budget

import (
	"encoding/json"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
)

// ExecutionRecord is an execution as the ledger holds it.
type ExecutionRecord struct {
	ID           string
	Run          RunRef
	AgentVersion string
	Status       string    // "running" until its end is recorded, then "completed" or the failure kind
	StartedAt    time.Time //
	EndedAt      time.Time // zero while running
	Usage        Usage     // what its binding calls and charges used
	Attachments  json.RawMessage
	Context      telemetry.Context
	// Network is what its egress proxy decided, as ExecutionEnd.Network gave it; nil for an
	// execution without network rules.
	Network json.RawMessage
}
