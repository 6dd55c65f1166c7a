//go:build linux

package bwrap_test

import (
	"context"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/bwrap"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/spawned"
	"github.com/mcp-sandbox/mcp-sandbox/engine/sandboxtest"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

func TestMain(m *testing.M) { sandboxtest.Main(m) }

// requireBwrap skips the test, naming why, where bwrap cannot be found for opts.
func requireBwrap(t *testing.T, opts *bwrap.Options) {
	t.Helper()
	_, reason := bwrap.Find(opts)
	gate.Require(t, "bwrap", reason == "", reason)
}

func newRunner(t *testing.T, ceiling engine.Limits, opts bwrap.Options) *engine.Runner {
	t.Helper()
	requireBwrap(t, &opts)
	b, err := bwrap.New(context.Background(), &opts)
	return sandboxtest.Runner(t, b, err, &engine.RunnerOptions{Ceiling: ceiling, Isolation: engine.LevelIsolated,
		Artifacts: engine.ArtifactPolicy{Collect: true}})
}

func TestContract(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Config{
		Level: engine.LevelIsolated,
		New: func(t *testing.T, ceiling engine.Limits) engine.Sandbox {
			return newRunner(t, ceiling, bwrap.Options{})
		},
	})
}

func TestMissingBwrapIsNamed(t *testing.T) {
	_, err := bwrap.New(context.Background(), &bwrap.Options{Options: spawned.Options{Disable: []string{"bwrap"}}})
	if err == nil || failure.KindOf(err) != failure.BackendUnavailable {
		t.Fatalf("New with bwrap disabled: %v, want backend_unavailable", err)
	}
	_, err = bwrap.New(context.Background(), &bwrap.Options{Bwrap: "/nonexistent/bwrap"})
	if err == nil || failure.KindOf(err) != failure.BackendUnavailable {
		t.Fatalf("New with a missing bwrap: %v, want backend_unavailable", err)
	}
}
