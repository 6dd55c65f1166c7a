package assembly

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

func TestOpenBackendSelection(t *testing.T) {
	found := testEnv.detectLocal(configs.Profile{})
	names := map[string]bool{}
	for _, f := range found {
		names[f.Name] = true
	}
	if len(found) != 3 || !names["namespaces"] || !names["bwrap"] || !names["process"] {
		t.Fatalf("detected %+v, want namespaces, bwrap and process", found)
	}
	best, err := engine.SelectLocal(found, engine.LevelIsolated)
	if err != nil {
		gate.Require(t, "isolated", false, fmt.Sprintf("this host has no isolated backend: %v", err))
	}
	b, _, err := testEnv.openBackend(context.Background(), "p", configs.Profile{Backend: "local"}, engine.LevelIsolated, "")
	if err != nil || b.Name() != best.Name {
		t.Fatalf("local at isolated opened %v, %v; want %s", b, err, best.Name)
	}
	_, _, err = testEnv.openBackend(context.Background(), "p", configs.Profile{Backend: "process"}, engine.LevelIsolated, "")
	if err == nil || !strings.Contains(err.Error(), "cannot reach") {
		t.Fatalf("process at isolated: %v, want a refusal", err)
	}
}

// TestBuiltBackendsAreTheSwitch: openProfile opens exactly the backends builtBackends names,
// so what check accepts is what serve can run.
func TestBuiltBackendsAreTheSwitch(t *testing.T) {
	const notBuilt = "not available in this build"
	for _, b := range []string{configs.BackendLocal, configs.BackendProcess, configs.BackendNamespaces, configs.BackendBwrap, configs.BackendContainer, configs.BackendRemote} {
		p := configs.Default().Profiles[configs.DefaultProfileName]
		p.Backend = b
		sb, err := testEnv.openProfile(context.Background(), "p", p, openOptions{})
		if err == nil {
			sb.Close()
		}
		opened := err == nil || !strings.Contains(err.Error(), notBuilt)
		if built := slices.Contains(builtBackends, b); opened != built {
			t.Errorf("backend %s: in builtBackends %v, but openBackend: %v", b, built, err)
		}
	}
}

// `local` on macOS and Windows falls back to the process level when no container engine
// answers, and says why in every result; it says nothing when it reached isolated, or where
// the container backend was no candidate (Linux).
func TestContainerFallback(t *testing.T) {
	noEngine := engine.LocalBackend{Name: "container", Isolation: engine.LevelIsolated, Reason: "no container runtime answers here (podman: not installed)"}
	process := engine.LocalBackend{Name: "jobobject", Isolation: engine.LevelProcess, Available: true}
	got := containerFallback([]engine.LocalBackend{noEngine, process}, process)
	for _, want := range []string{"process level (jobobject)", "needs a container engine", "podman: not installed"} {
		if !strings.Contains(got, want) {
			t.Errorf("fallback %q does not say %q", got, want)
		}
	}
	isolated := noEngine
	isolated.Available = true
	if got := containerFallback([]engine.LocalBackend{isolated, process}, isolated); got != "" {
		t.Errorf("an isolated pick has a fallback: %q", got)
	}
	if got := containerFallback([]engine.LocalBackend{process}, process); got != "" {
		t.Errorf("no container candidate, yet a fallback: %q", got)
	}
}
