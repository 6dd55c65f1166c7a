//go:build !linux && !darwin && !windows

package main

import (
	"runtime"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
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
