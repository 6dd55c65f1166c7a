package assembly

import (
	"context"
	"fmt"
	"runtime"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/bwrap"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/container"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/jobobject"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/namespaces"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/process"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/seatbelt"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/spawned"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/inithelper"
)

// The backends, each opened in one switch (openBackend) and detected for `local` in one list
// (detectLocal), on every system alike. Every backend package builds on every system and
// answers for itself where it does not run (its New refuses, its Available says why, in its
// own per-system files, as STYLE's platform splits are), so this file names each of them on
// every system with no build tag and no shim of the command's own. Which backends `local`
// considers, and the advice after its refusal, differ by system: that is data, a switch on
// runtime.GOOS here. There is no registry: a backend that put itself into a map when imported
// would let an import change what a config may name, out of sight of this switch.

// openBackend picks the backend a profile names. `local` takes the strongest local backend
// that reaches the profile's level, and never a weaker one; when that is below the isolated
// level while a container engine could have given it (macOS and Windows, where `local` takes
// the container backend whenever an engine answers), fallback says why, for every result.
func (e Env) openBackend(ctx context.Context, name string, p configs.Profile, level engine.Level, cacheDir string) (b engine.Backend, fallback string, err error) {
	backend := p.Backend
	if backend == configs.BackendLocal {
		found := e.detectLocal(p)
		pick, err := engine.SelectLocal(found, level)
		if err != nil {
			return nil, "", failure.New(failure.IsolationUnavailable, "profile %q: %v; %s", name, err, localAdvice())
		}
		backend = pick.Name
		fallback = containerFallback(found, pick)
	}
	switch backend {
	case configs.BackendProcess:
		if level.AtLeast(engine.LevelIsolated) {
			return nil, "", failure.New(failure.IsolationUnavailable, "profile %q requires isolation %q, which the process backend cannot reach; "+
				"use a backend with a kernel boundary (namespaces, bwrap: apt-get install bubblewrap)", name, level)
		}
		o := &process.Options{Options: e.localOptions(p)}
		o.CacheDir = cacheDir
		b, err = process.New(ctx, o)
	case configs.BackendNamespaces:
		o := e.nsOptions(p)
		o.CacheDir = cacheDir
		b, err = namespaces.New(ctx, o)
	case configs.BackendBwrap:
		o := e.bwrapOptions(p)
		o.CacheDir = cacheDir
		b, err = bwrap.New(ctx, o)
	case configs.BackendContainer:
		b, err = container.New(ctx, e.containerOptions(p))
	case "seatbelt": // what local picks on macOS without a container engine
		b, err = seatbelt.New(ctx, &seatbelt.Options{Python: p.Python, Env: e.allowedEnv(p.EnvAllowlist), CacheDir: cacheDir})
	case "jobobject": // what local picks on Windows without a container engine
		b, err = jobobject.NewBackend(ctx, &jobobject.Options{Python: p.Python, Env: e.allowedEnv(p.EnvAllowlist)})
	default:
		return nil, "", fmt.Errorf("profile %q: backend %q is not available in this build", name, p.Backend)
	}
	return b, fallback, err
}

// detectLocal lists the local backends this host offers for profile p, with the reason and
// install guidance for each one it does not. It starts nothing. Linux's own (namespaces,
// bwrap, process) are listed everywhere, absent elsewhere with why; off Linux `local` takes
// the container backend where an engine answers, and else the system's process level
// (seatbelt on macOS, jobobject on Windows).
func (e Env) detectLocal(p configs.Profile) []engine.LocalBackend {
	nsWhy := e.namespacesWhy(p)
	_, bwWhy := bwrap.Find(e.bwrapOptions(p))
	procOK, procWhy := process.Available()
	found := []engine.LocalBackend{
		{Name: configs.BackendNamespaces, Isolation: engine.LevelIsolated, Available: nsWhy == "", Reason: nsWhy},
		{Name: configs.BackendBwrap, Isolation: engine.LevelIsolated, Available: bwWhy == "", Reason: bwWhy},
		{Name: configs.BackendProcess, Isolation: engine.LevelProcess, Available: procOK, Reason: procWhy},
	}
	switch runtime.GOOS {
	case "darwin":
		ok, why := seatbelt.Available()
		found = append(found, e.detectContainer(context.Background(), p),
			engine.LocalBackend{Name: "seatbelt", Isolation: engine.LevelProcess, Available: ok, Reason: why})
	case "windows":
		ok, why := jobobject.Available(p.Python)
		found = append(found, e.detectContainer(context.Background(), p),
			engine.LocalBackend{Name: "jobobject", Isolation: engine.LevelProcess, Available: ok, Reason: why})
	}
	return engine.DetectLocalBackends(found)
}

// namespacesWhy is why the namespaces backend is unavailable to profile p here, or "": on
// macOS, that the system has no kernel boundary for a local child at all.
func (e Env) namespacesWhy(p configs.Profile) string {
	if runtime.GOOS == "darwin" {
		return seatbelt.IsolatedWhy
	}
	_, why := namespaces.Available(e.nsOptions(p))
	return why
}

// localAdvice follows a refusal of `backend: local`.
func localAdvice() string {
	switch runtime.GOOS {
	case "darwin", "windows":
		advice := "start Docker Desktop or a Podman machine (podman machine start) with the sandbox image built (mcp-sandbox image build), or use a remote backend"
		if runtime.GOOS == "windows" {
			// Only a container engine's VM gives a kernel boundary there (docs/design.md §4.1).
			advice += " (mcp-sandbox sandbox-service on a Linux host)"
		}
		return advice + ", or lower the profile's isolation to process"
	}
	return "install bubblewrap (apt-get install bubblewrap) or enable user namespaces, or lower the profile's isolation"
}

// containerFallback says why `local` picked pick, below the isolated level, where the
// container backend was a candidate (found lists it on macOS and Windows): "" when the pick is
// isolated or no container candidate was there.
func containerFallback(found []engine.LocalBackend, pick engine.LocalBackend) string {
	if pick.Isolation.AtLeast(engine.LevelIsolated) {
		return ""
	}
	for _, b := range found {
		if b.Name == configs.BackendContainer && !b.Available {
			return fmt.Sprintf("programs run at the %s level (%s): the isolated level needs a container engine, and %s", pick.Isolation, pick.Name, b.Reason)
		}
	}
	return ""
}

// localOptions are what profile p sets for every Linux local backend alike, and the init
// helper they all exec: the embedded one, written to its file at the first call, or this
// binary.
func (e Env) localOptions(p configs.Profile) spawned.Options {
	return spawned.Options{Python: p.Python, RunAs: p.RunAs, Env: e.allowedEnv(p.EnvAllowlist), Disable: e.disabledMechanisms(),
		InitPath: inithelper.Resolve().Path}
}

// nsOptions: warm.start auto (the default) and template fork a warm pool's children from
// templates where this host allows it; exec forbids templates.
func (e Env) nsOptions(p configs.Profile) *namespaces.Options {
	return &namespaces.Options{Options: e.localOptions(p), Template: p.Warm.Start == nil || *p.Warm.Start != configs.WarmStartExec}
}

func (e Env) bwrapOptions(p configs.Profile) *bwrap.Options {
	return &bwrap.Options{Options: e.localOptions(p)}
}

// templateWhy says why the namespaces backend of profile p execs its warm children here
// instead of forking them from templates, or "" when it forks them. It starts no child.
func (e Env) templateWhy(ctx context.Context, p configs.Profile, cacheDir string) string {
	o := e.nsOptions(p)
	o.CacheDir = cacheDir
	return namespaces.TemplateWhy(ctx, o)
}

// detectContainer is the container backend as profile p would find it: a runtime that
// answers and the image present, or why not and the command that fixes it. It starts nothing.
func (e Env) detectContainer(ctx context.Context, p configs.Profile) engine.LocalBackend {
	d := container.Detect(ctx, e.containerOptions(p))
	return engine.LocalBackend{Name: configs.BackendContainer, Isolation: engine.LevelIsolated, Available: d.Available, Reason: d.Reason}
}

// containerOptions: the container backend runs wherever a docker or podman CLI reaches an
// engine: on Linux the engine may be this host's; on macOS and Windows it is Docker
// Desktop's or a Podman machine's VM, or a remote one (docs/design.md §4.5).
func (e Env) containerOptions(p configs.Profile) *container.Options {
	c := configs.Container{}
	if p.Container != nil {
		c = *p.Container
	}
	return &container.Options{Runtime: c.Runtime, Image: c.Image, Python: c.Python, OCIRuntime: c.OCIRuntime,
		RunAs: p.RunAs, Env: e.allowedEnv(p.EnvAllowlist), Disable: e.disabledMechanisms()}
}
