//go:build !windows

package main

import (
	"context"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
)

// The jobobject backend is Windows's (local_windows.go); `local` never picks it elsewhere.
func newJobObject(context.Context, configs.Profile, string) (engine.Backend, error) {
	return onlyOn("jobobject", "Windows")
}
