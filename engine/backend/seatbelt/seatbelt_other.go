//go:build !darwin

package seatbelt

import (
	"context"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// elsewhere is why the seatbelt backend does not run here.
const elsewhere = "the seatbelt backend runs on macOS only"

// Available reports that the seatbelt backend does not run here, and why.
func Available() (bool, string) { return false, elsewhere }

// New refuses off macOS, saying why.
func New(context.Context, *Options) (engine.Backend, error) {
	return nil, failure.New(failure.BackendUnavailable, "%s", elsewhere)
}
