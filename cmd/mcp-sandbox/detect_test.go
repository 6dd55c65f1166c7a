package main

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
	found := detectLocal(configs.Profile{})
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
	b, err := openBackend(context.Background(), "p", configs.Profile{Backend: "local"}, engine.LevelIsolated, "")
	if err != nil || b.Name() != best.Name {
		t.Fatalf("local at isolated opened %v, %v; want %s", b, err, best.Name)
	}
	_, err = openBackend(context.Background(), "p", configs.Profile{Backend: "process"}, engine.LevelIsolated, "")
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
		sb, err := openProfile(context.Background(), "p", p, openOptions{})
		if err == nil {
			sb.Close()
		}
		opened := err == nil || !strings.Contains(err.Error(), notBuilt)
		if built := slices.Contains(builtBackends, b); opened != built {
			t.Errorf("backend %s: in builtBackends %v, but openBackend: %v", b, built, err)
		}
	}
}
