package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
)

func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs, configPath := commandFlags("doctor", doctorUsage, stderr)
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
		Description *engine.Description `json:"description"`
		// Identity: without root, what the profile's programs run as and how to do better.
		Identity string `json:"identity,omitempty"`
	}
	euid, _ := hostUser()
	var reports []profileReport
	ready := true
	detected := detectLocal(configs.Profile{})
	// The container backend is never what `local` picks, but doctor says whether it could run,
	// for the default image, or for the first container profile's.
	boxed := configs.Profile{Backend: configs.BackendContainer}
	for _, name := range sortedKeys(cfg.Profiles) {
		if p, _ := cfg.Profile(name); p.Backend == configs.BackendContainer {
			boxed = p
			break
		}
	}
	detected = append(detected, detectContainer(ctx, boxed))
	for _, name := range sortedKeys(cfg.Profiles) {
		p, _ := cfg.Profile(name)
		d := &engine.Description{Backend: p.Backend, Guarantees: engine.Guarantees{}, Mechanisms: []string{}, Problems: []string{}}
		runner, err := openProfile(ctx, name, p, openOptions{cacheDir: dataDir(cfg)})
		if err != nil {
			d.Problems = append(d.Problems, err.Error())
		} else {
			d = runner.Describe(ctx)
			runner.Close()
		}
		ready = ready && d.Ready
		reports = append(reports, profileReport{name, d, identityNote(euid, d, hostIdentityAdvice(p))})
	}
	store := probeStorage(ctx, cfg)
	ready = ready && store.Ledger.Ready && store.Blobs.Ready
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(map[string]any{"backends": detected, "profiles": reports, "storage": store})
	} else {
		fmt.Fprintln(stdout, "local backends on this host, strongest first (then the container backend):")
		for _, b := range detected {
			state := "available"
			if !b.Available {
				state = "unavailable: " + b.Reason
			}
			fmt.Fprintf(stdout, "  %-11s %-9s %s\n", b.Name, b.Isolation, state)
		}
		fmt.Fprintln(stdout)
		for _, r := range reports {
			d := r.Description
			state := "ready"
			if !d.Ready {
				state = "NOT READY"
			}
			fmt.Fprintf(stdout, "profile %s: backend %s, isolation %s, %s\n", r.Profile, d.Backend, d.Isolation, state)
			if d.Python != "" {
				fmt.Fprintf(stdout, "  python %s\n", d.Python)
			}
			for _, dim := range engine.Dimensions {
				fmt.Fprintf(stdout, "  %-14s %s\n", dim, d.Guarantees.Get(dim))
			}
			fmt.Fprintf(stdout, "  mechanisms: %s\n", strings.Join(d.Mechanisms, ", "))
			l := d.LimitCeiling
			fmt.Fprintf(stdout, "  hard limits: cpu %gs, wall %gs, memory %d bytes, file size %d bytes, %d processes\n",
				l.CPUSeconds, l.WallSeconds, l.MemoryBytes, l.FileSizeBytes, l.ProcessCount)
			if r.Identity != "" {
				fmt.Fprintf(stdout, "  identity: %s\n", r.Identity)
			}
			for _, p := range d.Problems {
				fmt.Fprintf(stdout, "  problem: %s\n", p)
			}
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
	}
	if !ready {
		return exitFailure, nil
	}
	return exitOK, nil
}

const doctorUsage = `Usage: mcp-sandbox doctor [--config FILE] [--json]

Lists the local sandbox backends this host offers (and, for each one it does not, why and
what to install), then describes every profile of the config: its backend, the isolation
level it reached, each of the ten guarantees graded enforced, unverified or unavailable, the
mechanisms in use, and any problem. It runs a fixed probe in each sandbox and never a program.
Last it names the run ledger and the blob store in use (a DSN by its reference, env:NAME or
file:PATH, never its text) and, for PostgreSQL, whether the server answers. Exit status 1 when
a profile or a store is not ready.
`
