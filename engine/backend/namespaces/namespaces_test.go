//go:build linux

package namespaces_test

import (
	"context"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/namespaces"
	"github.com/mcp-sandbox/mcp-sandbox/engine/sandboxtest"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

func TestMain(m *testing.M) { sandboxtest.Main(m) }

func newRunner(t *testing.T, ceiling engine.Limits, opts namespaces.Options, ro engine.RunnerOptions) *engine.Runner {
	t.Helper()
	ok, reason := namespaces.Available(&opts)
	gate.Require(t, "namespaces", ok, reason)
	b, err := namespaces.New(context.Background(), &opts)
	ro.Ceiling = ceiling
	if ro.Isolation == "" {
		ro.Isolation = engine.LevelIsolated
	}
	return sandboxtest.Runner(t, b, err, &ro)
}

func TestContract(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Config{
		Level: engine.LevelIsolated,
		New: func(t *testing.T, ceiling engine.Limits) engine.Sandbox {
			return newRunner(t, ceiling, namespaces.Options{}, engine.RunnerOptions{Artifacts: engine.ArtifactPolicy{Collect: true}})
		},
	})
}
