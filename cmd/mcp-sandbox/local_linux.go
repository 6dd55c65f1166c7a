package main

import (
	"context"
	"fmt"

	"github.com/mcp-sandbox/mcp-sandbox/cmd/mcp-sandbox/internal/inithelper"
	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/bwrap"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/container"
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

func newContainer(ctx context.Context, p configs.Profile) (engine.Backend, error) {
	return container.New(ctx, containerOptions(p))
}

// watchPause watches for the pause process rootless podman starts at its first command (the
// container backend's probes run podman); the function it returns ends the one the probes
// started, and says why one stays when another podman process of the user uses it.
func watchPause() func() string {
	w := container.WatchPause()
	return func() string {
		if _, kept := w.End(); len(kept) > 0 {
			return fmt.Sprintf("podman's pause process (pid %d), started by the container backend's probe, stays: another podman process of this user joined it", kept[0])
		}
		return ""
	}
}

// detectContainer is the container backend as profile p would find it: a runtime that
// answers and the image present, or why not and the command that fixes it. It starts nothing.
func detectContainer(ctx context.Context, p configs.Profile) engine.LocalBackend {
	d := container.Detect(ctx, containerOptions(p))
	return engine.LocalBackend{Name: "container", Isolation: engine.LevelIsolated, Available: d.Available, Reason: d.Reason}
}

func containerOptions(p configs.Profile) *container.Options {
	c := configs.Container{}
	if p.Container != nil {
		c = *p.Container
	}
	return &container.Options{Runtime: c.Runtime, Image: c.Image, Python: c.Python, OCIRuntime: c.OCIRuntime,
		RunAs: p.RunAs, Env: allowedEnv(p.EnvAllowlist), Disable: disabledMechanisms()}
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
