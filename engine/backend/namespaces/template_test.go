//go:build linux

package namespaces_test

import (
	"context"
	"os"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/namespaces"
	"github.com/mcp-sandbox/mcp-sandbox/engine/sandboxtest"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// templateRunner is a Runner whose warm pools fork their children from a template. A warm
// miss forks too (the pool's template serves it), so every execution here runs in a forked
// child, which each test checks through the result's start block.
func templateRunner(t *testing.T, ceiling engine.Limits, ro engine.RunnerOptions) *engine.Runner {
	t.Helper()
	gate.Require(t, "root", os.Geteuid() == 0, "this version forks from templates only on a root host")
	ro.Warm = engine.WarmPolicy{Min: 1, Max: 2}
	return newRunner(t, ceiling, namespaces.Options{Template: true}, ro)
}

func wantForked(t *testing.T, r *engine.Outcome) {
	t.Helper()
	if r.Started == nil || r.Started.Kind != engine.StartForked {
		t.Fatalf("start %+v, want forked (failure %+v, stderr %q)", r.Started, r.Failure, r.Stderr)
	}
}

func TestTemplateForksAChild(t *testing.T) {
	r := templateRunner(t, engine.DefaultLimits, engine.RunnerOptions{})
	res := r.Run(t.Context(), engine.Execution{Program: "print('hi')\n6*7", Terms: engine.Terms{Network: engine.NetworkNone}})
	wantForked(t, res)
	if !res.OK() || string(res.Value) != "42" || res.Stdout != "hi\n" {
		t.Fatalf("value %s stdout %q failure %+v", res.Value, res.Stdout, res.Failure)
	}
	t.Logf("guarantees %v isolation %s start %+v", res.Guarantees, res.Isolation, *res.Started)
}

// forkedOnly is a Sandbox that fails its test when an execution's child was not forked.
type forkedOnly struct {
	*engine.Runner
	t *testing.T
}

func (s forkedOnly) Run(ctx context.Context, ex engine.Execution) *engine.Outcome {
	res := s.Runner.Run(ctx, ex)
	if res.Started != nil && res.Started.Kind != engine.StartForked {
		s.t.Errorf("an execution's child was %s, not forked: %+v", res.Started.Kind, res.Failure)
	}
	return res
}

// TestTemplateContract runs the contract suite, hostile list included, with every child
// forked from a template: concurrent executions with the same terms are siblings of one
// template there ("hostile/concurrent executions" is the sibling case of the suite).
func TestTemplateContract(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Config{
		Level: engine.LevelIsolated,
		New: func(t *testing.T, ceiling engine.Limits) engine.Sandbox {
			gate.Require(t, "root", os.Geteuid() == 0, "this version forks from templates only on a root host")
			var opts namespaces.Options
			namespaces.ForkAll(&opts)
			r := newRunner(t, ceiling, opts, engine.RunnerOptions{Artifacts: engine.ArtifactPolicy{Collect: true}})
			return forkedOnly{r, t}
		},
	})
}
