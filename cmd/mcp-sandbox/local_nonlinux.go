//go:build !linux

package main

import (
	"context"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// Linux's own local backends (process, namespaces, bwrap) are absent on every other system, for the reason the system's localWhy gives
// (local_darwin.go, local_windows.go, local_other.go): one set of refusals for all of them.

func unavailable() (engine.Backend, error) {
	return nil, failure.New(failure.BackendUnavailable, "%s", localWhy)
}

func newProcess(context.Context, configs.Profile, string) (engine.Backend, error) {
	return unavailable()
}
func templateWhy(context.Context, configs.Profile, string) string { return localWhy }

func newNamespaces(context.Context, configs.Profile, string) (engine.Backend, error) {
	return unavailable()
}
func newBwrap(context.Context, configs.Profile, string) (engine.Backend, error) { return unavailable() }
