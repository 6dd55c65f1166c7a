package sandboxtest

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
)

// keptAtKill: whatever the program wrote before a kill (wall clock, CPU, memory, cancel) is in
// the result, in each of the ways CPython writes: print (block-buffered on a pipe), a partial
// line, sys.stdout.buffer, a stream the program built itself and made sys.stdout, os.write,
// and stderr.
func (c *contract) keptAtKill(t *testing.T) {
	hang := "\nimport time\ntime.sleep(100)"
	for _, tc := range []struct {
		name, program  string
		stdout, stderr string
	}{
		{"print", `print("before the hang")`, "before the hang\n", ""},
		{"a partial line", `import sys; sys.stdout.write("no newline yet")`, "no newline yet", ""},
		{"sys.stdout.buffer", `import sys; sys.stdout.buffer.write(b"raw bytes\n")`, "raw bytes\n", ""},
		{"a stream of its own as sys.stdout", `import io, sys
sys.stdout = io.TextIOWrapper(open(1, "wb", buffering=1 << 16, closefd=False))
print("own buffer")`, "own buffer\n", ""},
		{"os.write", `import os; os.write(1, b"direct\n")`, "direct\n", ""},
		{"stderr", `import sys; sys.stderr.write("warning, no newline")`, "", "warning, no newline"},
	} {
		t.Run("wall clock, "+tc.name, func(t *testing.T) {
			seconds := c.wallAfterStart(t)
			start := time.Now()
			r := c.run(t, tc.program+hang, engine.Limits{WallSeconds: seconds})
			wantKind(t, r, failure.Timeout, engine.LimitWall)
			within(t, start, seconds+flushGraceSlack)
			if r.Stdout != tc.stdout || r.Stderr != tc.stderr {
				t.Fatalf("stdout %q, stderr %q; want %q and %q", r.Stdout, r.Stderr, tc.stdout, tc.stderr)
			}
		})
	}
	t.Run("cpu", func(t *testing.T) {
		r := c.run(t, "print('before the spin')\nwhile True:\n    pass", engine.Limits{CPUSeconds: 1})
		wantKind(t, r, failure.LimitExceeded, engine.LimitCPU)
		if r.Stdout != "before the spin\n" {
			t.Fatalf("stdout %q, want the line printed before the spin", r.Stdout)
		}
	})
	t.Run("memory", func(t *testing.T) {
		r := c.run(t, "print('before the allocation')\nx = bytearray(2 << 30)", engine.Limits{MemoryBytes: 512 << 20})
		wantKind(t, r, failure.LimitExceeded, engine.LimitMemory)
		if r.Stdout != "before the allocation\n" {
			t.Fatalf("stdout %q, want the line printed before the allocation", r.Stdout)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		// The cancel must come after the program printed (wholeExecutionNow).
		delay := c.wholeExecutionNow(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		timer := time.AfterFunc(delay, cancel)
		defer timer.Stop()
		start := time.Now()
		r := c.runCtx(t, ctx, "print('before the cancel')"+hang, engine.Limits{})
		wantKind(t, r, failure.Cancelled, "")
		within(t, start, delay.Seconds()+flushGraceSlack)
		if r.Stdout != "before the cancel\n" {
			t.Fatalf("stdout %q, want the line printed before the cancel", r.Stdout)
		}
	})
	t.Run("a program that ignores the request to flush still ends on time", func(t *testing.T) {
		seconds := c.wallAfterStart(t)
		start := time.Now()
		r := c.run(t, "import signal\nsignal.signal(signal.SIGIO, signal.SIG_IGN)\nprint('may be lost')"+hang, engine.Limits{WallSeconds: seconds})
		wantKind(t, r, failure.Timeout, engine.LimitWall)
		within(t, start, seconds+flushGraceSlack)
	})
}

// flushGraceSlack bounds, in seconds, how long after its limit a killed execution may return:
// the host's wait for the child to flush (engine.FlushGrace) plus the kill and the teardown.
const flushGraceSlack = 2.5

// wholeExecutionNow is twice what a whole execution of pass takes on this machine, as loaded
// as it is now, and a second more: a host-side clock that must not fire before a program's
// first statement waits at least this long. A fixed second was once shorter than a
// container's start on a loaded machine, and a fixed 2 s wall clock than bwrap's.
func (c *contract) wholeExecutionNow(t *testing.T) time.Duration {
	t.Helper()
	measured := time.Now()
	wantOK(t, c.run(t, "pass", engine.Limits{}))
	return 2*time.Since(measured) + time.Second
}

// wallAfterStart is a wall_seconds that leaves a program time to reach its first statements
// (the wall clock runs from the child's start, hello included): 2, or wholeExecutionNow in
// whole seconds where the machine is slower than that now.
func (c *contract) wallAfterStart(t *testing.T) float64 {
	t.Helper()
	return max(2, math.Ceil(c.wholeExecutionNow(t).Seconds()))
}
