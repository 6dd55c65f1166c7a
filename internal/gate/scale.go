package gate

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// ScaleEnv names the factor by which tests stretch their deadlines: a number, at least 1. CI
// sets it where it runs tests beside other work (its stress step).
const ScaleEnv = "MCP_SANDBOX_TEST_SCALE"

// maxLoadScale caps the factor read from the machine's load, so that a test that would hang
// still fails within the test binary's own timeout.
const maxLoadScale = 8

// Scale is the factor by which a test stretches a deadline on this machine now: the larger of
// ScaleEnv and the one-minute load average per CPU (at most maxLoadScale), and never less
// than 1. A deadline in a test is how long the slowest machine that still works may take, and
// a loaded 2-core machine gives every process a fraction of a core: so the busier the
// machine, the longer the wait, with no setting needed (a newcomer's `make test` beside a
// build). Where speed is the point, a benchmark measures it.
func Scale() float64 {
	f := 1.0
	if v, err := strconv.ParseFloat(strings.TrimSpace(os.Getenv(ScaleEnv)), 64); err == nil && v > f {
		f = v
	}
	if l := loadPerCPU(); l > f {
		f = min(l, max(f, maxLoadScale))
	}
	return f
}

// Scaled is d stretched by Scale: a test's deadline, written as what an idle machine needs
// with room to spare.
func Scaled(d time.Duration) time.Duration { return time.Duration(float64(d) * Scale()) }

// loadPerCPU is the one-minute load average over the CPUs this process may use; 0 where the
// kernel does not say (no /proc/loadavg).
func loadPerCPU() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 0
	}
	l, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return 0
	}
	return l / float64(runtime.NumCPU())
}
