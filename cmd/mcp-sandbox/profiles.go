package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
)

// builtBackends are the profile backends this build can run: openProfile opens each (remote
// itself, the others through openBackend's switch; TestBuiltBackendsAreTheSwitch holds them
// together), and a config naming another is refused by every command, check included
// (configs.Options.Backends). A new backend is added to both.
var builtBackends = []string{configs.BackendLocal, configs.BackendProcess, configs.BackendNamespaces, configs.BackendBwrap, configs.BackendContainer, configs.BackendRemote}

// loadOptions is what this build tells configs about itself.
func loadOptions() *configs.Options { return &configs.Options{Backends: builtBackends} }

// loadConfig reads path, or the embedded default when path is empty.
func loadConfig(path string) (*configs.Config, error) {
	if path == "" {
		return configs.Default(), nil
	}
	cfg, err := configs.LoadWith(path, loadOptions())
	if err != nil {
		return nil, usagef("%v", err)
	}
	return cfg, nil
}

// profileSandbox is what a profile opens into: a local engine.Runner, or the remote backend.
type profileSandbox interface {
	engine.Sandbox
	// Terms narrows requested terms against the profile's ceiling.
	Terms(engine.Terms) engine.Terms
	// Prewarm starts the warm children of owner (a tenant) for terms, where the backend keeps
	// any.
	Prewarm(owner string, t engine.Terms)
	Close() error
}

// openProfile builds the sandbox a profile names: its backend, with the profile's caps.
// It starts no child; Describe does, with a fixed probe.
func openProfile(ctx context.Context, name string, p configs.Profile, o openOptions) (profileSandbox, error) {
	level, err := engine.ParseLevel(p.Isolation)
	if err != nil {
		return nil, fmt.Errorf("profile %q: %v", name, err)
	}
	if p.Backend == configs.BackendRemote {
		return openRemote(name, p, level)
	}
	backend, fallback, err := openBackend(ctx, name, p, level, o.cacheDir)
	if err != nil {
		return nil, err
	}
	pol, err := egressPolicy(p)
	if err != nil {
		if c, ok := backend.(io.Closer); ok {
			c.Close()
		}
		return nil, fmt.Errorf("profile %q: %v", name, err)
	}
	return engine.NewRunner(backend, &engine.RunnerOptions{
		Fallback:       fallback,
		Egress:         pol,
		Ceiling:        engineLimits(p.HardLimits, engine.Limits{}),
		Isolation:      level,
		AllowNetwork:   p.AllowNetwork,
		AllowSameUID:   p.AllowSameUID,
		IdentityAdvice: hostIdentityAdvice(p),
		EnvAllowlist:   p.EnvAllowlist,
		PreviewBytes:   int64(deref(p.Output.PreviewBytes)),
		MaxBytes:       int64(deref(p.Output.MaxBytes)),
		Warm:           warmPolicy(p, o.warm),
		Artifacts:      artifactPolicy(p),
	})
}

func warmPolicy(p configs.Profile, warm bool) engine.WarmPolicy {
	if !warm {
		return engine.WarmPolicy{}
	}
	return engine.WarmPolicy{Min: deref(p.Warm.Min), Max: deref(p.Warm.Max),
		Idle: time.Duration(deref(p.Warm.IdleSeconds) * float64(time.Second))}
}

func artifactPolicy(p configs.Profile) engine.ArtifactPolicy {
	return engine.ArtifactPolicy{
		Collect:  p.Artifacts.Collection == configs.CollectionCollect,
		MaxFiles: deref(p.Artifacts.MaxFiles),
		MaxBytes: int64(deref(p.Artifacts.MaxBytes)),
	}
}

// openOptions say how a command uses the profiles it opens.
type openOptions struct {
	// warm keeps the profile's warm pools (warm: {min, max, idle_seconds}): a server does, so
	// a program does not wait for an interpreter to start; a one-shot command keeps none.
	warm bool
	// cacheDir is where a local backend remembers its interpreter's directories between
	// starts (the data dir; "" for none).
	cacheDir string
}

// DisableEnv names mechanisms to treat as absent on this host, comma-separated (namespaces,
// userns, subids, bwrap, cgroup, landlock, seccomp, identity, socket: the container backend's
// channel is then the container's standard streams): an operator's way to see what a
// profile does on a host without them, and the tests' way to stand in for such a host.
// Nothing is ever made stronger by it.
const DisableEnv = "MCP_SANDBOX_DISABLE"

func disabledMechanisms() []string {
	var out []string
	for _, m := range strings.Split(os.Getenv(DisableEnv), ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	return out
}

// allowedEnv reads the allowlisted variables from this process's environment.
func allowedEnv(names []string) map[string]string {
	env := map[string]string{}
	for _, n := range names {
		if v, ok := os.LookupEnv(n); ok {
			env[n] = v
		}
	}
	return env
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// engineLimits converts config limits, taking unset fields from base.
func engineLimits(l configs.Limits, base engine.Limits) engine.Limits {
	if l.CPUSeconds != nil {
		base.CPUSeconds = *l.CPUSeconds
	}
	if l.WallSeconds != nil {
		base.WallSeconds = *l.WallSeconds
	}
	if l.MemoryBytes != nil {
		base.MemoryBytes = int64(*l.MemoryBytes)
	}
	if l.FileSizeBytes != nil {
		base.FileSizeBytes = int64(*l.FileSizeBytes)
	}
	if l.ProcessCount != nil {
		base.ProcessCount = *l.ProcessCount
	}
	return base
}

// agentTerms is what an agent asks for, narrowed by its tenant's policy: the middle two of
// the four narrowing steps (the backend's ceiling and the profile's hard limits are the
// Runner's). refusal is non-empty when the request cannot be granted at all.
func agentTerms(t configs.Tenant, ce *configs.CodeExecution) (terms engine.Terms, refusal string) {
	req := engineLimits(ce.Limits, engine.Limits{}).Narrow(engineLimits(t.Policy.Limits, engine.Limits{}))
	level, _ := engine.ParseLevel(ce.Isolation)
	network := engine.NetworkNone
	if ce.Network == string(engine.NetworkUnrestricted) || ce.Network == string(engine.NetworkRules) {
		network = engine.Network(ce.Network)
		if t.Policy.AllowNetwork != nil && !*t.Policy.AllowNetwork {
			refusal = "network access was requested, but this tenant's policy does not allow network; nothing ran"
		}
	}
	return engine.Terms{Limits: req, Network: network, Isolation: level}, refusal
}

// errNoTenant: a config valid for sandbox-service alone has nothing to serve or run.
var errNoTenant = usagef("the config defines no tenant; a config with only sandbox_service is for `mcp-sandbox sandbox-service`")

// pickTenant resolves --tenant, defaulting to the only one there is.
func pickTenant(cfg *configs.Config, tenant string) (string, error) {
	if len(cfg.Tenants) == 0 {
		return "", errNoTenant
	}
	if tenant == "" {
		names := sortedKeys(cfg.Tenants)
		if len(names) != 1 {
			return "", usagef("--tenant is required: the config has tenants %v", names)
		}
		tenant = names[0]
	}
	if _, ok := cfg.Tenants[tenant]; !ok {
		return "", usagef("no tenant %q in the config (tenants: %v)", tenant, sortedKeys(cfg.Tenants))
	}
	return tenant, nil
}

// pickAgent resolves --tenant and --agent, each defaulting to the only one there is.
func pickAgent(cfg *configs.Config, tenant, agent string) (string, string, error) {
	tenant, err := pickTenant(cfg, tenant)
	if err != nil {
		return "", "", err
	}
	t := cfg.Tenants[tenant]
	if agent == "" {
		names := sortedKeys(t.Agents)
		if len(names) != 1 {
			return "", "", usagef("--agent is required: tenant %q has agents %v", tenant, names)
		}
		agent = names[0]
	}
	if _, ok := t.Agents[agent]; !ok {
		return "", "", usagef("tenant %q has no agent %q (agents: %v)", tenant, agent, sortedKeys(t.Agents))
	}
	return tenant, agent, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
