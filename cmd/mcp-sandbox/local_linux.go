package main

import (
	"context"

	"github.com/mcp-sandbox/mcp-sandbox/cmd/mcp-sandbox/internal/inithelper"
	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/bwrap"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/namespaces"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/process"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/spawned"
)

// The local backends exist on Linux only (local_other.go says so elsewhere).

func newProcess(ctx context.Context, p configs.Profile, cacheDir string) (engine.Backend, error) {
	o := &process.Options{Options: localOptions(p)}
	o.CacheDir = cacheDir
	return process.New(ctx, o)
}

func newNamespaces(ctx context.Context, p configs.Profile, cacheDir string) (engine.Backend, error) {
	o := nsOptions(p)
	o.CacheDir = cacheDir
	return namespaces.New(ctx, o)
}

func newBwrap(ctx context.Context, p configs.Profile, cacheDir string) (engine.Backend, error) {
	o := bwrapOptions(p)
	o.CacheDir = cacheDir
	return bwrap.New(ctx, o)
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

// namespacesWhy is why the namespaces backend is unavailable to profile p here, or "".
func namespacesWhy(p configs.Profile) string {
	_, why := namespaces.Available(nsOptions(p))
	return why
}

// localOptions are what profile p sets for every local backend alike, and the init helper
// they all exec: the embedded one, written to its file at the first call, or this binary.
func localOptions(p configs.Profile) spawned.Options {
	return spawned.Options{Python: p.Python, RunAs: p.RunAs, Env: allowedEnv(p.EnvAllowlist), Disable: disabledMechanisms(),
		InitPath: inithelper.Resolve().Path}
}

// nsOptions: warm.start auto (the default) and template fork a warm pool's children from
// templates where this host allows it; exec forbids templates.
func nsOptions(p configs.Profile) *namespaces.Options {
	return &namespaces.Options{Options: localOptions(p), Template: p.Warm.Start == nil || *p.Warm.Start != configs.WarmStartExec}
}

// templateWhy says why the namespaces backend of profile p execs its warm children here
// instead of forking them from templates, or "" when it forks them. It starts no child.
func templateWhy(ctx context.Context, p configs.Profile, cacheDir string) string {
	o := nsOptions(p)
	o.CacheDir = cacheDir
	b, err := namespaces.New(ctx, o)
	if err != nil {
		return failureMessage(err)
	}
	defer b.Close()
	return b.TemplateWhy()
}

func bwrapOptions(p configs.Profile) *bwrap.Options {
	return &bwrap.Options{Options: localOptions(p)}
}
