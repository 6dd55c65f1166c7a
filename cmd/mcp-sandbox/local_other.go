//go:build !linux && !darwin && !windows

package main

import (
	"context"
	"runtime"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// The local backends need Linux (the init helper, rlimits, namespaces, cgroups). Elsewhere the
// binary builds and serves, doctor reports each local backend absent with this reason, and a
// profile that names one is refused; a remote backend is the way to run programs from here.
var localWhy = "the local backends need Linux; this build is for " + runtime.GOOS + " (use a remote backend)"

func detectLocal(configs.Profile) []engine.LocalBackend {
	return engine.DetectLocalBackends([]engine.LocalBackend{
		{Name: "namespaces", Isolation: engine.LevelIsolated, Reason: localWhy},
		{Name: "bwrap", Isolation: engine.LevelIsolated, Reason: localWhy},
		{Name: "process", Isolation: engine.LevelProcess, Reason: localWhy},
	})
}

func namespacesWhy(configs.Profile) string { return localWhy }

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
func newContainer(context.Context, configs.Profile) (engine.Backend, error)     { return unavailable() }

func detectContainer(context.Context, configs.Profile) engine.LocalBackend {
	return engine.LocalBackend{Name: "container", Isolation: engine.LevelIsolated, Reason: localWhy}
}

func watchPause() func() string { return func() string { return "" } }
