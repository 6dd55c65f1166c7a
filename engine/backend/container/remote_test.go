package container_test

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/container"
	"github.com/mcp-sandbox/mcp-sandbox/engine/sandboxtest"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// The backend driven exactly as on a Mac or a Windows machine, whose engine (Docker Desktop's,
// a Podman machine's) runs containers in a VM: the CLI reaches the engine only through its
// environment (remoteEngine), nothing of this host is mounted into a container, the channel
// is the container's standard streams, and whatever the host cannot see of the VM (the
// container's cgroup, its OOM count, its workspace) is read through the engine or from the
// probe inside it. One engine and one backend for the whole pass: the contract suite with
// its hostile list, an OOM kill, the grades, and nothing left behind.
func TestRemoteEngine(t *testing.T) {
	opts := container.Options{Runtime: remoteEngine(t), StateDir: t.TempDir()}
	d := container.Detect(context.Background(), &opts)
	gate.Require(t, "container", d.Available, d.Reason)
	if !d.Runtime.Remote {
		t.Fatalf("the runtime %s at %s does not count as an engine elsewhere", d.Runtime.Kind, d.Runtime.Path)
	}
	b, err := container.New(context.Background(), &opts)
	if err != nil {
		t.Fatalf("container.New: %v", err)
	}
	m := b.Mechanisms()
	for _, want := range []string{"token-streams", "engine-cgroup", "engine-oom-report", "workspace-through-exec", "seccomp-policy"} {
		if !slices.ContainsFunc(m, func(s string) bool { return strings.HasPrefix(s, want) }) {
			t.Errorf("mechanisms %q do not name %s", m, want)
		}
	}
	if slices.Contains(m, "token-socket") || slices.ContainsFunc(m, func(s string) bool { return strings.HasPrefix(s, "execution-cgroup") }) {
		t.Errorf("mechanisms %q name a socket or a cgroup of this host", m)
	}
	var r *engine.Runner
	sandboxtest.Run(t, sandboxtest.Config{Level: engine.LevelIsolated, New: func(t *testing.T, ceiling engine.Limits) engine.Sandbox {
		// The suite's 1 GiB of stdout asks for 60 s of wall clock: through the engine's API
		// and its CLI it crosses two more copies than from a local engine, 24 s on this
		// loaded 2-core machine at load 10 and past 30 s at load 20, so the ceiling lets it
		// have what it asks for.
		ceiling.WallSeconds = max(ceiling.WallSeconds, 60)
		r = sandboxtest.Runner(t, b, nil, &engine.RunnerOptions{Ceiling: ceiling, Isolation: engine.LevelIsolated,
			Artifacts: engine.ArtifactPolicy{Collect: true}})
		return r
	}})

	t.Run("the limits graded from the probe inside the engine", func(t *testing.T) {
		res := run(t, r, "6*7", engine.Limits{MemoryBytes: 96 << 20, ProcessCount: 16})
		if res.Failure != nil || string(res.Value) != "42" {
			t.Fatalf("value %s, failure %+v", res.Value, res.Failure)
		}
		g := res.Guarantees
		if res.Isolation != engine.LevelIsolated || g.Get(engine.DimMemory) != engine.Enforced || g.Get(engine.DimProcessCount) != engine.Enforced ||
			g.Get(engine.DimIdentity) != engine.Enforced || g.Get(engine.DimNetwork) != engine.Enforced {
			t.Errorf("isolation %s, guarantees %v: want isolated, with memory, process_count, identity and network enforced", res.Isolation, g)
		}
	})

	t.Run("an OOM kill is the memory limit's", func(t *testing.T) {
		// Files in the container's /dev/shm count against its memory cgroup and no rlimit: the
		// kernel's OOM killer ends the interpreter, as only the engine can tell.
		start := time.Now()
		res := run(t, r, "i = 0\nwhile True:\n    with open('/dev/shm/f%d' % i, 'wb') as f:\n        f.write(b'x' * (4 << 20))\n    i += 1",
			engine.Limits{MemoryBytes: 48 << 20})
		if res.Failure == nil || res.Failure.Kind != failure.LimitExceeded || res.LimitHit == nil || *res.LimitHit != engine.LimitMemory {
			t.Fatalf("want memory_bytes exceeded by an OOM kill, got %+v (limit %v)\nstderr: %s", res.Failure, res.LimitHit, res.Stderr)
		}
		if el := time.Since(start); el > gate.Scaled(30*time.Second) {
			t.Errorf("an OOM kill took %v to become a result", el)
		}
	})

	t.Run("nothing of the executions is left in the engine", func(t *testing.T) {
		r.Close()
		out, err := exec.Command(b.Runtime().Path, "ps", "-a", "-q", "--filter", "label="+container.OwnerLabel+"="+b.Owner()).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "" {
			t.Errorf("containers left: %q (%v)", out, err)
		}
	})
}

// A docker CLI in front of a Podman engine (a Podman machine's docker socket) cannot hand the
// engine the sandbox's seccomp profile: the backend refuses it and names the podman CLI.
func TestDockerCLIBeforePodmanEngineRefused(t *testing.T) {
	remoteEngine(t)
	_, err := exec.LookPath("docker")
	gate.AppliesOnly(t, err == nil, "no docker CLI is installed here")
	d := container.Detect(context.Background(), &container.Options{Runtime: "docker"})
	if d.Available || !strings.Contains(d.Reason, "Podman engine") || !strings.Contains(d.Reason, "podman CLI") {
		t.Fatalf("docker before a Podman engine: available %v, %q; want a refusal naming the podman CLI", d.Available, d.Reason)
	}
}
