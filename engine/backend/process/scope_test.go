//go:build linux

package process_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/process"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// TestKillAllSparesOtherExecutions: two executions share the default sandbox uid; one sends
// SIGKILL to every process it may signal (kill(-1)), and the other still finishes. Landlock's
// signal scope keeps a program's signals inside its own sandbox.
func TestKillAllSparesOtherExecutions(t *testing.T) {
	gate.Hostile(t)
	r := newSandbox(t, engine.DefaultLimits, process.Options{})
	var wg sync.WaitGroup
	var victim *engine.Outcome
	wg.Add(1)
	go func() {
		defer wg.Done()
		victim = r.Run(context.Background(), engine.Execution{Program: "import time\ntime.sleep(2)\n'alive'"})
	}()
	time.Sleep(700 * time.Millisecond) // the victim is asleep by now
	killer := r.Run(context.Background(), engine.Execution{Program: "import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError as e:\n    print(e)\n'sent'"})
	wg.Wait()
	if killer.Failure != nil {
		t.Logf("killer: %s: %s", killer.Failure.Kind, killer.Failure.Message)
	}
	if victim.Failure != nil || string(victim.Value) != `"alive"` {
		t.Fatalf("the other execution did not survive kill(-1): %+v %s", victim.Failure, victim.Value)
	}
}
