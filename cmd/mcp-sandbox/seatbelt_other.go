//go:build !darwin

package main

import (
	"context"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
)

// The seatbelt backend is macOS's (local_darwin.go); `local` never picks it elsewhere.
func newSeatbelt(context.Context, configs.Profile, string) (engine.Backend, error) {
	return onlyOn("seatbelt", "macOS")
}
