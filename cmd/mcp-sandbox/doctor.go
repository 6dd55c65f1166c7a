package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/internal/inithelper"
	"github.com/mcp-sandbox/mcp-sandbox/internal/owner"
)

func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs, configPath := commandFlags("doctor", doctorUsage, stdout, stderr)
	asJSON := fs.Bool("json", false, "print the descriptions as JSON")
	if answered, code, err := parseFlags(fs, args); answered {
		return code, err
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return exitUsage, err
	}
	type profileReport struct {
		Profile     string              `json:"profile"`
		Requires    engine.Level        `json:"requires_isolation"`
		Description *engine.Description `json:"description"`
		// Identity: without root, what the profile's programs run as and how to do better.
		Identity string `json:"identity,omitempty"`
		// WarmStart: how the profile's warm children are made (exec'd or forked), and why.
		WarmStart string `json:"warm_start"`
	}
	euid, _ := hostUser()
	endPause := watchPause() // no probe leaves rootless podman's pause process running
	var reports []profileReport
	ready := true
	detected := detectLocal(configs.Profile{})
	// On Linux the container backend is never what `local` picks, but doctor says whether it
	// could run, for the default image, or for the first container profile's.
	boxed := configs.Profile{Backend: configs.BackendContainer}
	for _, name := range sortedKeys(cfg.Profiles) {
		if p, _ := cfg.Profile(name); p.Backend == configs.BackendContainer {
			boxed = p
			break
		}
	}
	if !slices.ContainsFunc(detected, func(b engine.LocalBackend) bool { return b.Name == configs.BackendContainer }) {
		detected = append(detected, detectContainer(ctx, boxed))
	}
	// Off Linux, `local` takes the container backend where an engine answers: which engine,
	// its VM, the image, and what each level gives here.
	engineState := engineReportOf(ctx, cfg)
	for _, name := range sortedKeys(cfg.Profiles) {
		p, _ := cfg.Profile(name)
		level, _ := engine.ParseLevel(p.Isolation)
		// A profile whose backend cannot even be opened is described as the engine describes
		// a child that could not start: the floor level, nothing graded, its hard limits.
		d := &engine.Description{Backend: p.Backend, Isolation: engine.LevelProcess, Guarantees: engine.Guarantees{},
			Mechanisms: []string{}, Problems: []string{}, LimitCeiling: engineLimits(p.HardLimits, engine.DefaultLimits)}
		runner, err := openProfile(ctx, name, p, openOptions{cacheDir: dataDir(cfg)})
		if err != nil {
			d.Problems = append(d.Problems, failureMessage(err))
		} else {
			d = runner.Describe(ctx)
			runner.Close()
		}
		ready = ready && d.Ready
		reports = append(reports, profileReport{name, level, d, identityNote(euid, d, hostIdentityAdvice(p)), warmStartNote(p, d, func() string { return templateWhy(ctx, p, dataDir(cfg)) })})
	}
	pauseNote := endPause()
	helper := inithelper.Resolve()
	ownerLocks := owner.LockDirProblem()
	store := probeStorage(ctx, cfg)
	ready = ready && store.Ledger.Ready && store.Blobs.Ready
	quotas := quotaReportOf(cfg)
	upAuth := upstreamAuthOf(ctx, cfg, true, tokenProbeTimeout)
	ups := upstreamContainment(cfg)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		doc := map[string]any{"backends": detected, "init_helper": helper, "profiles": reports, "storage": store, "quotas": quotas, "tenant_auth": tenantAuthOf(cfg),
			"upstream_auth": upAuth, "upstreams": ups}
		if engineState != nil {
			doc["container_engine"] = engineState
		}
		if ownerLocks != "" {
			doc["owner_locks_problem"] = ownerLocks
		}
		_ = enc.Encode(doc)
	} else {
		fmt.Fprintln(stdout, "local backends on this host, strongest first (then the container backend):")
		for _, b := range detected {
			state := "available"
			if !b.Available {
				state = "unavailable: " + b.Reason
			}
			fmt.Fprintf(stdout, "  %-11s %-9s %s\n", b.Name, b.Isolation, state)
		}
		if engineState != nil {
			engineState.write(stdout)
		}
		if helper.Embedded {
			fmt.Fprintf(stdout, "init helper: %s (the helper alone, embedded in this binary: %.1f MB)\n", helper.Path, float64(helper.Size)/1e6)
		} else {
			fmt.Fprintf(stdout, "init helper: this binary (%s)\n", helper.Why)
		}
		if ownerLocks != "" {
			fmt.Fprintf(stdout, "owner locks: WARNING: %s\n", ownerLocks)
		}
		fmt.Fprintln(stdout)
		for _, r := range reports {
			printProfile(stdout, r.Profile, r.Requires, r.Description, r.Identity)
			fmt.Fprintf(stdout, "  warm start: %s\n", r.WarmStart)
		}
		fmt.Fprintln(stdout)
		fmt.Fprintln(stdout, "storage:")
		for _, x := range []struct {
			name string
			r    storeReport
		}{{"ledger", store.Ledger}, {"blobs", store.Blobs}} {
			state := "ready"
			if !x.r.Ready {
				state = "NOT READY: " + x.r.Problem
			}
			fmt.Fprintf(stdout, "  %-7s %-9s %s, %s\n", x.name, x.r.Kind, x.r.Location, state)
		}
		fmt.Fprintln(stdout)
		quotas.write(stdout)
		fmt.Fprintln(stdout)
		writeTenantAuth(stdout, cfg)
		writeUpstreamAuth(stdout, upAuth)
		if len(ups) > 0 {
			fmt.Fprintln(stdout)
			fmt.Fprintln(stdout, "stdio upstream servers:")
			for _, u := range ups {
				fmt.Fprintf(stdout, "  %-16s %s\n", u.Name, u.State)
			}
		}
		if pauseNote != "" {
			fmt.Fprintln(stdout)
			fmt.Fprintln(stdout, "note: "+pauseNote)
		}
	}
	if !ready {
		return exitFailure, nil
	}
	return exitOK, nil
}

// upstreamState is doctor's account of one stdio upstream: contained by a profile, or
// unconfined and why.
type upstreamState struct {
	Name      string `json:"name"`
	Contained bool   `json:"contained"`
	Profile   string `json:"profile,omitempty"`
	State     string `json:"state"`
}

func upstreamContainment(cfg *configs.Config) []upstreamState {
	var out []upstreamState
	for _, name := range sortedKeys(cfg.Upstreams) {
		u := cfg.Upstreams[name]
		if len(u.Command) == 0 {
			continue
		}
		s := upstreamState{Name: name, Profile: u.Sandbox}
		s.Contained, s.State = upstreamSandbox(cfg, u)
		out = append(out, s)
	}
	return out
}

const doctorUsage = `Usage: mcp-sandbox doctor [--config FILE] [--json]

Lists the local sandbox backends this host offers (and, for each one it does not, why and
what to install), then describes every profile of the config: its backend, the isolation
level it reached, each of the ten guarantees graded enforced, unverified or unavailable, the
mechanisms in use, and any problem. It runs a fixed probe in each sandbox and never a program.
Then it names the run ledger and the blob store in use (a DSN by its reference, env:NAME or
file:PATH, never its text) and, for PostgreSQL, whether the server answers. Last come the
quotas in force, the server's and each tenant's: programs running at once (and how long one
waits for a slot), sessions, and bytes kept in the blob store. Exit status 1 when a profile or
a store is not ready. Stdio upstream servers are listed as contained (sandbox: PROFILE) or
unconfined.
`

// quotaReport is doctor's account of the quotas in force, defaults filled: the server's and
// each tenant's.
type quotaReport struct {
	Server  configs.ServerQuotas            `json:"server"`
	Tenants map[string]configs.TenantQuotas `json:"tenants"`
}

func quotaReportOf(cfg *configs.Config) quotaReport {
	r := quotaReport{Server: cfg.ServerQuotas(), Tenants: map[string]configs.TenantQuotas{}}
	for _, name := range sortedKeys(cfg.Tenants) {
		r.Tenants[name] = cfg.TenantQuotas(name)
	}
	return r
}

func (r quotaReport) write(w io.Writer) {
	fmt.Fprintln(w, "quotas (programs and sessions are per server process; stored bytes are the blob store's):")
	s := r.Server
	fmt.Fprintf(w, "  %-18s %d programs at once, %d sessions, %s stored\n", "server (all tenants)",
		*s.MaxConcurrentExecutions, *s.MaxSessions, *s.MaxStoredBytes)
	for _, name := range sortedKeys(r.Tenants) {
		q := r.Tenants[name]
		fmt.Fprintf(w, "  tenant %-11s %d programs at once (a run waits %gs for a slot), %d sessions, %s stored\n",
			name, *q.MaxConcurrentExecutions, *q.QueueSeconds, *q.MaxSessions, *q.MaxStoredBytes)
	}
}

// warmStartNote says how profile p's warm children are made, as described by d, and why:
// forked from a template where warm.start is not exec and the namespaces backend names
// warm-template-fork among its mechanisms (it does where this host allows it); otherwise why
// names the missing prerequisite.
func warmStartNote(p configs.Profile, d *engine.Description, why func() string) string {
	start := configs.WarmStartAuto
	if p.Warm.Start != nil {
		start = *p.Warm.Start
	}
	switch {
	case start == configs.WarmStartExec:
		return "exec (warm.start: exec forbids templates)"
	case d.Backend != "namespaces":
		return "exec (warm.start: " + start + "): only the namespaces backend forks from templates, not " + d.Backend
	case slices.Contains(d.Mechanisms, "warm-template-fork"):
		return "template (warm.start: " + start + "): warm children without network are forked from a template per tenant and terms"
	}
	return "exec (warm.start: " + start + "): this host cannot fork from templates: " + why()
}

// printProfile renders one profile's description. A profile whose sandbox could not be
// started says so instead of listing grades nobody observed.
func printProfile(w io.Writer, name string, requires engine.Level, d *engine.Description, identity string) {
	graded := len(d.Guarantees) > 0
	switch {
	case d.Ready:
		fmt.Fprintf(w, "profile %s: backend %s, isolation %s, ready\n", name, d.Backend, d.Isolation)
	case graded:
		fmt.Fprintf(w, "profile %s: backend %s, isolation %s (requires %s), NOT READY\n", name, d.Backend, d.Isolation, requires)
	default:
		fmt.Fprintf(w, "profile %s: backend %s, NOT READY: no sandbox could be started (requires isolation %s)\n", name, d.Backend, requires)
	}
	if d.Python != "" {
		fmt.Fprintf(w, "  python %s\n", d.Python)
	}
	if graded {
		for _, dim := range engine.Dimensions {
			fmt.Fprintf(w, "  %-14s %s\n", dim, d.Guarantees.Get(dim))
		}
	}
	if len(d.Mechanisms) > 0 {
		fmt.Fprintf(w, "  mechanisms: %s\n", strings.Join(d.Mechanisms, ", "))
	}
	if d.Fallback != "" {
		fmt.Fprintf(w, "  fallback: %s\n", d.Fallback)
	}
	l := d.LimitCeiling
	fmt.Fprintf(w, "  hard limits: cpu %gs, wall %gs, memory %s, file size %s, %d processes\n",
		l.CPUSeconds, l.WallSeconds, byteText(l.MemoryBytes), byteText(l.FileSizeBytes), l.ProcessCount)
	if identity != "" {
		fmt.Fprintf(w, "  identity: %s\n", identity)
	}
	for _, p := range d.Problems {
		fmt.Fprintf(w, "  problem: %s\n", p)
	}
}

// byteText is n bytes the way a config writes it (configs.ByteSize): 512MiB rather than
// 536870912 bytes; a size in no whole unit says "bytes".
func byteText(n int64) string {
	if n > 0 && n%int64(configs.KiB) == 0 {
		return configs.ByteSize(n).String()
	}
	return fmt.Sprintf("%d bytes", n)
}

// failureMessage is what a failure says, without its kind and without repeating its cause
// (a *failure.Error's Error() carries both): its refusal's text.
func failureMessage(err error) string {
	_, msg := engine.RefusalOf(err)
	return msg
}
