package container_test

import (
	"context"
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
