package main

import (
	"context"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/bwrap"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/namespaces"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/process"
)

// The local backends exist on Linux only (local_other.go says so elsewhere).

func newProcess(ctx context.Context, p configs.Profile) (engine.Backend, error) {
	return process.New(ctx, &process.Options{Python: p.Python, RunAs: p.RunAs, Env: allowedEnv(p.EnvAllowlist), Disable: disabledMechanisms()})
}

func newNamespaces(ctx context.Context, p configs.Profile) (engine.Backend, error) {
	return namespaces.New(ctx, nsOptions(p))
}

func newBwrap(ctx context.Context, p configs.Profile) (engine.Backend, error) {
	return bwrap.New(ctx, bwrapOptions(p))
}

// detectLocal lists the local backends this host offers for profile p, with the reason and
// install guidance for each one it does not. It starts nothing.
func detectLocal(p configs.Profile) []engine.LocalBackend {
	nsOK, nsWhy := namespaces.Available(nsOptions(p))
	_, bwWhy := bwrap.Find(bwrapOptions(p))
	return engine.DetectLocalBackends([]engine.LocalBackend{
		{Name: "namespaces", Isolation: engine.LevelIsolated, Available: nsOK, Reason: nsWhy},
		{Name: "bwrap", Isolation: engine.LevelIsolated, Available: bwWhy == "", Reason: bwWhy},
		{Name: "process", Isolation: engine.LevelProcess, Available: true},
	})
}

func nsOptions(p configs.Profile) *namespaces.Options {
	return &namespaces.Options{Python: p.Python, RunAs: p.RunAs, Env: allowedEnv(p.EnvAllowlist), Disable: disabledMechanisms()}
}

func bwrapOptions(p configs.Profile) *bwrap.Options {
	return &bwrap.Options{Python: p.Python, RunAs: p.RunAs, Env: allowedEnv(p.EnvAllowlist), Disable: disabledMechanisms()}
}
