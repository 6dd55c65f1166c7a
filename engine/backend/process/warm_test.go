//go:build linux

package process_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/process"
	"github.com/mcp-sandbox/mcp-sandbox/engine/sandboxtest"
)

// TestWarmChildrenShareNothing: with warm children, every execution still gets its own
// process and an empty workspace, and Close leaves nothing running.
func TestWarmChildrenShareNothing(t *testing.T) {
	b, err := process.New(context.Background(), &process.Options{})
	r := sandboxtest.Runner(t, b, err, &engine.RunnerOptions{Warm: engine.WarmPolicy{Min: 1, Max: 1}})
	seen := map[float64]bool{}
	for i := 0; i < 5; i++ {
		res := r.Run(context.Background(), engine.Execution{Program: "import os\nopen('mine', 'w').write('x')\n[os.getpid(), sorted(os.listdir('.'))]"})
		if res.Failure != nil {
			t.Fatalf("run %d: %s: %s", i, res.Failure.Kind, res.Failure.Message)
		}
		var v []any
		if err := json.Unmarshal(res.Value, &v); err != nil {
			t.Fatal(err)
		}
		pid := v[0].(float64)
		if seen[pid] {
			t.Fatalf("run %d reused pid %v", i, pid)
		}
		seen[pid] = true
		if files := v[1].([]any); len(files) != 1 {
			t.Fatalf("run %d saw a workspace that was not empty: %v", i, files)
		}
	}
	r.Close()
}
