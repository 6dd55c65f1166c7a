//go:build darwin

package seatbelt_test

import (
	"context"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/seatbelt"
	"github.com/mcp-sandbox/mcp-sandbox/engine/sandboxtest"
)

func TestMain(m *testing.M) { sandboxtest.Main(m) }

// TestContract runs the contract suite on a Mac. It was compiled for darwin on Linux
// (GOOS=darwin go test -c); it has not yet been run on a Mac. The child runs as the user's
// own uid (no identity of its own exists here), so the runner accepts the same uid, as the
// README's macOS configuration does.
func TestContract(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Config{
		Level: engine.LevelProcess,
		New: func(t *testing.T, ceiling engine.Limits) engine.Sandbox {
			b, err := seatbelt.New(context.Background(), &seatbelt.Options{})
			return sandboxtest.Runner(t, b, err, &engine.RunnerOptions{Ceiling: ceiling, AllowSameUID: true,
				Artifacts: engine.ArtifactPolicy{Collect: true}})
		},
	})
}
