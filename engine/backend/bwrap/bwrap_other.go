//go:build !linux

package bwrap

import (
	"context"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/spawned"
)

// Find finds no bwrap off Linux, and says why.
func Find(*Options) (string, string) { return "", spawned.Absent("bwrap") }

// New refuses off Linux, saying why (spawned.Absent).
func New(context.Context, *Options) (engine.Backend, error) { return nil, spawned.Unavailable("bwrap") }
