//go:build !windows

package jobobject

import (
	"context"
	"io"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// elsewhere is why the jobobject backend does not run here.
const elsewhere = "the jobobject backend runs on Windows only"

// Available reports that the jobobject backend does not run here, and why.
func Available(string) (bool, string) { return false, elsewhere }

// NewBackend refuses off Windows, saying why.
func NewBackend(context.Context, *Options) (engine.Backend, error) {
	return nil, failure.New(failure.BackendUnavailable, "%s", elsewhere)
}

// ChildMain: Probe's hostile children are Windows's; elsewhere there is none to run.
func ChildMain([]string, io.Writer) int { return 2 }
