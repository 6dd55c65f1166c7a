//go:build darwin

package main

import (
	"context"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/seatbelt"
)

// On macOS `local` is the container backend (the isolated level) where Docker Desktop or a
// Podman machine answers with the image present, and otherwise the seatbelt backend (the
// process level), saying why in every result (openBackend's fallback); Linux's own local
// backends are reported absent with why.
var localWhy = "this backend needs Linux; on macOS the local backend is seatbelt"

// localAdvice follows a refusal of `backend: local`.
const localAdvice = "start Docker Desktop or a Podman machine (podman machine start) with the sandbox image built " +
	"(mcp-sandbox image build), or use a remote backend, or lower the profile's isolation to process"

func detectLocal(p configs.Profile) []engine.LocalBackend {
	ok, why := seatbelt.Available()
	return engine.DetectLocalBackends([]engine.LocalBackend{
		detectContainer(context.Background(), p),
		{Name: "seatbelt", Isolation: engine.LevelProcess, Available: ok, Reason: why},
		{Name: "namespaces", Isolation: engine.LevelIsolated, Reason: seatbelt.IsolatedWhy},
		{Name: "bwrap", Isolation: engine.LevelIsolated, Reason: localWhy},
		{Name: "process", Isolation: engine.LevelProcess, Reason: localWhy},
	})
}

func newSeatbelt(ctx context.Context, p configs.Profile, cacheDir string) (engine.Backend, error) {
	return seatbelt.New(ctx, &seatbelt.Options{Python: p.Python, Env: allowedEnv(p.EnvAllowlist), CacheDir: cacheDir})
}

func namespacesWhy(configs.Profile) string { return seatbelt.IsolatedWhy }
