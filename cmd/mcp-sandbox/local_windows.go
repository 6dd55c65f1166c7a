//go:build windows

package main

import (
	"context"
	"os"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/jobobject"
)

// On Windows `local` is the container backend (the isolated level) where Docker Desktop or a
// Podman machine answers with the image present, and otherwise the jobobject backend (the
// process level), saying why in every result (openBackend's fallback); Linux's own local
// backends are reported absent with why.
var localWhy = "this backend needs Linux; on Windows the local backend is jobobject"

// The jobobject backend's probe runs this binary as its hostile children (a busy loop, a
// tree, an allocation, more processes than allowed): they are dispatched before main runs.
func init() {
	if len(os.Args) > 1 && os.Args[1] == jobobject.ChildArg {
		os.Exit(jobobject.ChildMain(os.Args[2:], os.Stdout))
	}
}

func detectLocal(p configs.Profile) []engine.LocalBackend {
	ok, why := jobobject.Available(p.Python)
	return engine.DetectLocalBackends([]engine.LocalBackend{
		detectContainer(context.Background(), p),
		{Name: "jobobject", Isolation: engine.LevelProcess, Available: ok, Reason: why},
		{Name: "namespaces", Isolation: engine.LevelIsolated, Reason: localWhy},
		{Name: "bwrap", Isolation: engine.LevelIsolated, Reason: localWhy},
		{Name: "process", Isolation: engine.LevelProcess, Reason: localWhy},
	})
}

func newJobObject(ctx context.Context, p configs.Profile, _ string) (engine.Backend, error) {
	return jobobject.NewBackend(ctx, &jobobject.Options{Python: p.Python, Env: allowedEnv(p.EnvAllowlist)})
}

func namespacesWhy(configs.Profile) string { return localWhy }
