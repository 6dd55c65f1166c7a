package assembly

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/container"
)

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

// engineReport is doctor's account, off Linux, of the container engine through which `local`
// reaches the isolated level, and of what each level gives on this host.
type engineReport struct {
	// Engine is the engine that answered (its CLI, version, where its containers run), or
	// why none did.
	Engine string `json:"engine"`
	// Machine says whether a Podman machine's VM runs (podman's own list), where podman is.
	Machine string `json:"machine,omitempty"`
	// Image is the sandbox image and whether the engine holds it.
	Image string `json:"image"`
	// Levels says, for isolated and process, which backend gives it here and what it holds,
	// or why none does.
	Levels map[string]string `json:"levels"`
}

// engineReportOf is the engine report for the config's first profile of backend local (its
// python and container settings), or the embedded default's; nil on Linux, where `local`
// never takes the container backend.
func engineReportOf(ctx context.Context, cfg *Config) *engineReport {
	if runtime.GOOS == "linux" {
		return nil
	}
	p := configs.Default().Profiles[configs.DefaultProfileName]
	for _, name := range sortedKeys(cfg.Profiles) {
		if q, _ := cfg.Profile(name); q.Backend == configs.BackendLocal {
			p = q
			break
		}
	}
	found := cfg.detectLocal(p)
	opts := cfg.containerOptions(p)
	d := container.Detect(ctx, opts)
	image := opts.Image
	if image == "" {
		image = container.DefaultImage
	}
	r := &engineReport{Machine: d.Machine, Levels: map[string]string{}}
	switch rt := d.Runtime; {
	case rt == nil:
		r.Engine = "none answers: " + d.Reason
		r.Image = image + ": unknown (no engine to ask)"
	default:
		where := "in a VM or on another machine"
		if !rt.Remote {
			where = "on this host"
		}
		mode := "as root there"
		if rt.Rootless {
			mode = "rootless"
		}
		r.Engine = fmt.Sprintf("%s %s at %s, running containers %s (%s, %s)", rt.Kind, rt.Version, rt.Path, where, mode, rt.Arch)
		r.Image = image + ": present"
		if !d.Available {
			r.Image = image + ": " + d.Reason
		}
	}
	for _, b := range found {
		switch {
		case b.Name == configs.BackendContainer && b.Available:
			r.Levels["isolated"] = "container: each program in a container of that engine (its own pid, mount, ipc, uts and network namespaces " +
				"with no network, a read-only root, no capabilities, the sandbox's seccomp policy, the memory and process limits of the " +
				"container's cgroup as its probe sees them); backend: local takes it"
		case b.Name == configs.BackendContainer:
			r.Levels["isolated"] = "unavailable until an engine answers with the image: " + b.Reason
		case b.Isolation == engine.LevelProcess && b.Available && r.Levels["process"] == "":
			r.Levels["process"] = b.Name + ": " + processLevelHolds[b.Name] +
				"; backend: local falls back to it when no engine answers, and every result says so (isolation_fallback)"
		}
	}
	if r.Levels["process"] == "" {
		r.Levels["process"] = "unavailable: no local backend of the process level runs here"
	}
	return r
}

// processLevelHolds says in a line what the process level of macOS and Windows holds (the
// README's tables say it whole).
var processLevelHolds = map[string]string{
	"seatbelt":  "a Seatbelt profile per program (no network, writes only to its workspace); no memory cap, no identity of its own, no hold on an orphaned tree",
	"jobobject": "a Job Object per program (its tree, CPU, memory and process count where the job enforces them); no file boundary, no identity of its own",
}

func (r *engineReport) write(w io.Writer) {
	fmt.Fprintln(w, "container engine (the isolated level here):")
	fmt.Fprintf(w, "  engine   %s\n", r.Engine)
	if r.Machine != "" {
		fmt.Fprintf(w, "  vm       %s\n", r.Machine)
	}
	fmt.Fprintf(w, "  image    %s\n", r.Image)
	for _, level := range []string{"isolated", "process"} {
		fmt.Fprintf(w, "  %-8s %s\n", level, r.Levels[level])
	}
}
