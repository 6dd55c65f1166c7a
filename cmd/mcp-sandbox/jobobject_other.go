//go:build !windows

package main

import (
	"context"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// The jobobject backend is Windows's (local_windows.go); `local` never picks it elsewhere.
func newJobObject(context.Context, configs.Profile, string) (engine.Backend, error) {
	return nil, failure.New(failure.BackendUnavailable, "the jobobject backend runs on Windows only")
}
