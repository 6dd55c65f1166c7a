package assembly

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
)

// builtBackends are the profile backends this build can run: openProfile opens each (remote
// itself, the others through openBackend's switch; TestBuiltBackendsAreTheSwitch holds them
// together), and a config naming another is refused by every command, check included
// (configs.Options.Backends, by LoadOptions). A new backend is added to both.
var builtBackends = []string{configs.BackendLocal, configs.BackendProcess, configs.BackendNamespaces, configs.BackendBwrap, configs.BackendContainer, configs.BackendRemote}

// LoadOptions is what this build tells configs about itself: the backends it can open.
func LoadOptions() *configs.Options { return &configs.Options{Backends: builtBackends} }

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
func (e Env) openProfile(ctx context.Context, name string, p configs.Profile, o openOptions) (profileSandbox, error) {
	level, err := engine.ParseLevel(p.Isolation)
	if err != nil {
		return nil, fmt.Errorf("profile %q: %v", name, err)
	}
	if p.Backend == configs.BackendRemote {
		return e.openRemote(name, p, level)
	}
	backend, fallback, err := e.openBackend(ctx, name, p, level, o.cacheDir)
	if err != nil {
		return nil, err
	}
	pol, err := e.egressPolicy(p)
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
		IdentityAdvice: e.hostIdentityAdvice(p),
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

func (e Env) disabledMechanisms() []string {
	var out []string
	for _, m := range strings.Split(e.getenv(DisableEnv), ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	return out
}

// allowedEnv reads the allowlisted variables from this process's environment.
func (e Env) allowedEnv(names []string) map[string]string {
	env := map[string]string{}
	for _, n := range names {
		if v, ok := e.LookupEnv(n); ok {
			env[n] = v
		}
	}
	return env
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
