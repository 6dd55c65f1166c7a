//go:build linux

package process_test

import (
	"context"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/process"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/spawned"
	"github.com/mcp-sandbox/mcp-sandbox/engine/sandboxtest"
)

func TestMain(m *testing.M) { sandboxtest.Main(m) }

func newSandbox(t *testing.T, ceiling engine.Limits, opts process.Options) *engine.Runner {
	t.Helper()
	b, err := process.New(context.Background(), &opts)
	return sandboxtest.Runner(t, b, err, &engine.RunnerOptions{Ceiling: ceiling, Artifacts: engine.ArtifactPolicy{Collect: true}})
}

func TestContract(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Config{
		Level: engine.LevelProcess,
		New: func(t *testing.T, ceiling engine.Limits) engine.Sandbox {
			return newSandbox(t, ceiling, process.Options{})
		},
	})
}

// TestContractWithoutCgroup: on a host without a writable cgroup (no root, or none mounted
// writable) the tree still dies with the execution, setsid and double fork included: the
// helper stays as the tree's subreaper. The whole contract holds there too.
func TestContractWithoutCgroup(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Config{
		Level: engine.LevelProcess,
		New: func(t *testing.T, ceiling engine.Limits) engine.Sandbox {
			return newSandbox(t, ceiling, process.Options{Options: spawned.Options{Disable: []string{"cgroup"}}})
		},
	})
}
