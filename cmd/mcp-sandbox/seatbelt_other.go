//go:build !darwin

package main

import (
	"context"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// The seatbelt backend is macOS's (local_darwin.go); `local` never picks it elsewhere.
func newSeatbelt(context.Context, configs.Profile, string) (engine.Backend, error) {
	return nil, failure.New(failure.BackendUnavailable, "the seatbelt backend runs on macOS only")
}
