package container_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

func TestMain(m *testing.M) {
	runHelpers()
	gate.Main()
	code := m.Run()
	stopEngine()
	os.Exit(code)
}

func run(t *testing.T, r *engine.Runner, program string, lim engine.Limits) *engine.Outcome {
	t.Helper()
	return r.Run(context.Background(), engine.Execution{Program: program,
		Terms: engine.Terms{Limits: lim, Isolation: engine.LevelIsolated, Network: engine.NetworkNone}})
}

func wantValue(t *testing.T, res *engine.Outcome, into any) {
	t.Helper()
	if res.Failure != nil {
		t.Fatalf("failure %s: %s\n%s\nstderr: %s", res.Failure.Kind, res.Failure.Message, res.Failure.Traceback, res.Stderr)
	}
	if err := json.Unmarshal(res.Value, into); err != nil {
		t.Fatalf("value %s: %v", res.Value, err)
	}
}
