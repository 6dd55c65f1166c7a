//go:build !linux

package process

import (
	"context"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/spawned"
)

// New refuses off Linux, saying why (spawned.Absent).
func New(context.Context, *Options) (engine.Backend, error) {
	return nil, spawned.Unavailable("process")
}
