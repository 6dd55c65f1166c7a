package assembly

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

// profileReport is doctor's account of one profile.
type profileReport struct {
	Profile     string              `json:"profile"`
	Requires    engine.Level        `json:"requires_isolation"`
	Description *engine.Description `json:"description"`
	// Identity: without root, what the profile's programs run as and how to do better.
	Identity string `json:"identity,omitempty"`
	// WarmStart: how the profile's warm children are made (exec'd or forked), and why.
	WarmStart string `json:"warm_start"`
}

// DoctorReport is `mcp-sandbox doctor`'s look at this host and a config: the local backends,
// each profile described by its own probe, the init helper, the stores, the quotas, how
// tenants and upstreams authenticate, and which stdio upstreams are contained.
type DoctorReport struct {
	// Ready: every profile and both stores are ready (doctor exits 1 otherwise).
	Ready bool

	cfg         *Config
	detected    []engine.LocalBackend
	engineState *engineReport
	reports     []profileReport
	pauseNote   string
	helper      inithelper.Helper
	ownerLocks  string
	store       storageReport
	quotas      quotaReport
	upAuth      map[string]upstreamAuth
	ups         []upstreamState
	tasks       taskReport
}

// Doctor describes this host and every profile of cfg. It runs a fixed probe in each
// sandbox and never a program.
func Doctor(ctx context.Context, cfg *Config) *DoctorReport {
	euid, _ := hostUser()
	endPause := watchPause() // no probe leaves rootless podman's pause process running
	var reports []profileReport
	ready := true
	detected := cfg.detectLocal(configs.Profile{})
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
		detected = append(detected, cfg.detectContainer(ctx, boxed))
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
		runner, err := cfg.openProfile(ctx, name, p, openOptions{cacheDir: dataDir(cfg)})
		if err != nil {
			d.Problems = append(d.Problems, failureMessage(err))
		} else {
			d = runner.Describe(ctx)
			runner.Close()
		}
		ready = ready && d.Ready
		reports = append(reports, profileReport{name, level, d, identityNote(euid, d, cfg.hostIdentityAdvice(p)), warmStartNote(p, d, func() string { return cfg.templateWhy(ctx, p, dataDir(cfg)) })})
	}
	pauseNote := endPause()
	helper := inithelper.Resolve()
	ownerLocks := owner.LockDirProblem()
	store := probeStorage(ctx, cfg)
	ready = ready && store.Ledger.Ready && store.Blobs.Ready
	quotas := quotaReportOf(cfg)
	upAuth := upstreamAuthOf(ctx, cfg, true, tokenProbeTimeout)
	ups := upstreamContainment(cfg)
	return &DoctorReport{Ready: ready, cfg: cfg, detected: detected, engineState: engineState, reports: reports, pauseNote: pauseNote,
		helper: helper, ownerLocks: ownerLocks, store: store, quotas: quotas, upAuth: upAuth, ups: ups, tasks: taskReportOf(cfg, store.Ledger)}
}

// WriteJSON writes the report as one JSON document.
func (r *DoctorReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	doc := map[string]any{"backends": r.detected, "init_helper": r.helper, "profiles": r.reports, "storage": r.store, "quotas": r.quotas, "tenant_auth": tenantAuthOf(r.cfg),
		"upstream_auth": r.upAuth, "upstreams": r.ups, "tasks": r.tasks}
	if r.engineState != nil {
		doc["container_engine"] = r.engineState
	}
	if r.ownerLocks != "" {
		doc["owner_locks_problem"] = r.ownerLocks
	}
	return enc.Encode(doc)
}

// WriteText writes the report for a person.
func (r *DoctorReport) WriteText(w io.Writer) {
	fmt.Fprintln(w, "local backends on this host, strongest first (then the container backend):")
	for _, b := range r.detected {
		state := "available"
		if !b.Available {
			state = "unavailable: " + b.Reason
		}
		fmt.Fprintf(w, "  %-11s %-9s %s\n", b.Name, b.Isolation, state)
	}
	if r.engineState != nil {
		r.engineState.write(w)
	}
	if r.helper.Embedded {
		fmt.Fprintf(w, "init helper: %s (the helper alone, embedded in this binary: %.1f MB)\n", r.helper.Path, float64(r.helper.Size)/1e6)
	} else {
		fmt.Fprintf(w, "init helper: this binary (%s)\n", r.helper.Why)
	}
	if r.ownerLocks != "" {
		fmt.Fprintf(w, "owner locks: WARNING: %s\n", r.ownerLocks)
	}
	fmt.Fprintln(w)
	for _, r := range r.reports {
		printProfile(w, r.Profile, r.Requires, r.Description, r.Identity)
		fmt.Fprintf(w, "  warm start: %s\n", r.WarmStart)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "storage:")
	for _, x := range []struct {
		name string
		r    storeReport
	}{{"ledger", r.store.Ledger}, {"blobs", r.store.Blobs}} {
		state := "ready"
		if !x.r.Ready {
			state = "NOT READY: " + x.r.Problem
		}
		fmt.Fprintf(w, "  %-7s %-9s %s, %s\n", x.name, x.r.Kind, x.r.Location, state)
	}
	fmt.Fprintln(w)
	r.quotas.write(w)
	fmt.Fprintln(w)
	r.tasks.write(w)
	fmt.Fprintln(w)
	writeTenantAuth(w, r.cfg)
	writeUpstreamAuth(w, r.upAuth)
	if len(r.ups) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "stdio upstream servers:")
		for _, u := range r.ups {
			fmt.Fprintf(w, "  %-16s %s\n", u.Name, u.State)
		}
	}
	if r.pauseNote != "" {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "note: "+r.pauseNote)
	}
}

// upstreamState is doctor's account of one stdio upstream: contained by a profile, or
// unconfined and why.
type upstreamState struct {
	Name      string `json:"name"`
	Contained bool   `json:"contained"`
	Profile   string `json:"profile,omitempty"`
	State     string `json:"state"`
}

func upstreamContainment(cfg *Config) []upstreamState {
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

// taskReport is doctor's account of run_code as an MCP task (docs/design.md §14.6, §14.7):
// which clients get one, how a task's program's call needing approval is asked, what a client
// without one gets, and where tasks are kept and how long.
type taskReport struct {
	Clients        string  `json:"clients"`
	Asked          string  `json:"asked"`
	Others         string  `json:"others"`
	Kept           string  `json:"kept"`
	RetentionHours float64 `json:"retention_hours"`
}

func taskReportOf(cfg *Config, ledger storeReport) taskReport {
	kept := "in the PostgreSQL ledger: any replica on it answers, a restart loses none (a program that died with its server reads failed)"
	switch {
	case ledger.Kind != "sqlite":
	case dataDir(cfg) == "":
		kept = "in this process's private ledger (no data_dir): lost when it exits"
	default:
		kept = "in the SQLite ledger " + ledger.Location + ": a restart loses none (a program that died with its server reads failed)"
	}
	return taskReport{
		Clients: "clients over streamable HTTP that ask for one (2025-11-25: a task field on tools/call; 2026-07-28: the io.modelcontextprotocol/tasks extension)",
		Asked: "a call needing approval puts the task input_required: 2025-11-25 asks by elicitation on the session, " +
			"2026-07-28 through the task (its input request, answered by tasks/update); the operator route answers either",
		Others: "a client that does not ask, and every client over stdio, gets a plain run_code call that holds its request open until the program ends",
		Kept:   kept, RetentionHours: cfg.Retention().Hours(),
	}
}

func (r taskReport) write(w io.Writer) {
	fmt.Fprintln(w, "run_code as an MCP task:")
	fmt.Fprintf(w, "  %-8s %s\n", "who:", r.Clients)
	fmt.Fprintf(w, "  %-8s %s\n", "asked:", r.Asked)
	fmt.Fprintf(w, "  %-8s %s\n", "others:", r.Others)
	fmt.Fprintf(w, "  %-8s %s, at most %gh (approvals.retention_hours)\n", "kept:", r.Kept, r.RetentionHours)
}

// quotaReport is doctor's account of the quotas in force, defaults filled: the server's and
// each tenant's.
type quotaReport struct {
	Server  configs.ServerQuotas            `json:"server"`
	Tenants map[string]configs.TenantQuotas `json:"tenants"`
}

func quotaReportOf(cfg *Config) quotaReport {
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
