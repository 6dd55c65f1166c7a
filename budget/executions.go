package budget

import (
	"encoding/json"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
)

// Network is what an execution's egress proxy decided, under network rules only
// (docs/design.md §18): requests forwarded, refusals by host, port and reason, and bytes each
// way on the sandbox's side. The ledger keeps it with the execution's end.
type Network struct {
	Allowed int64 `json:"allowed"`
	// Refused counts every refusal; Refusals groups them by host, port and reason, a bounded
	// number of groups (the proxy's), so a refusal past the last group is in Refused only.
	Refused  int64            `json:"refused"`
	Refusals []NetworkRefusal `json:"refusals"`
	BytesIn  int64            `json:"bytes_in"`  // into the sandbox
	BytesOut int64            `json:"bytes_out"` // out of the sandbox
}

// NetworkRefusal is how many times one host and port were refused for one reason.
type NetworkRefusal struct {
	Host   string `json:"host"`
	Port   int    `json:"port"`
	Reason string `json:"reason"`
	Times  int64  `json:"times"`
}

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
	// Network is nil for an execution without network rules.
	Network *Network
}

// MarshalNetwork is n as a ledger stores it: JSON, or nil (SQL NULL) for no network block.
func MarshalNetwork(n *Network) []byte {
	if n == nil {
		return nil
	}
	if n.Refusals == nil {
		c := *n
		c.Refusals = []NetworkRefusal{}
		n = &c
	}
	b, _ := json.Marshal(n) // plain numbers and strings: never fails
	return b
}

// UnmarshalNetwork is the network block a ledger stored (MarshalNetwork), nil for none.
func UnmarshalNetwork(b []byte) (*Network, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var n Network
	if err := json.Unmarshal(b, &n); err != nil {
		return nil, err
	}
	return &n, nil
}
