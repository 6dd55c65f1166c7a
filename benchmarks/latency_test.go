package benchmarks

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/process"
	"github.com/mcp-sandbox/mcp-sandbox/internal/launch"
)

var report = flag.Bool("bench-report", false, "take enough samples for a report")

func TestMain(m *testing.M) {
	launch.MaybeMain()
	flag.Parse()
	os.Exit(m.Run())
}

func samples() int {
	if *report {
		return 40
	}
	return 3
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// TestReport prints the median latency of a trivial execution through the engine, with a
// cold start and with a warm child, beside a bare interpreter start, sampled alternately so
// all three see the same machine.
func TestReport(t *testing.T) {
	ctx := context.Background()
	b, err := process.New(ctx, process.Options{})
	if err != nil {
		t.Fatal(err)
	}
	newRunner := func(warm int) *engine.Runner {
		r, err := engine.NewRunner(b, engine.RunnerOptions{AllowSameUID: os.Geteuid() != 0, Warm: warm})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	cold, warm := newRunner(0), newRunner(1)
	py := b.Python()
	run := func(r *engine.Runner) time.Duration {
		start := time.Now()
		res := r.Run(ctx, engine.Execution{Program: "pass"})
		d := time.Since(start)
		if res.Failure != nil {
			t.Fatalf("%s: %s", res.Failure.Kind, res.Failure.Message)
		}
		return d
	}
	var bare, coldRuns, warmRuns []time.Duration
	for i := 0; i < samples()+2; i++ {
		start := time.Now()
		if err := exec.Command(py, "-I", "-c", "pass").Run(); err != nil {
			t.Fatal(err)
		}
		d0 := time.Since(start)
		d1 := run(cold)
		time.Sleep(50 * time.Millisecond) // let the warm runner's refill finish, as it would between turns
		d2 := run(warm)
		if i >= 2 { // the first runs warm the caches
			bare, coldRuns, warmRuns = append(bare, d0), append(coldRuns, d1), append(warmRuns, d2)
		}
	}
	mb, mc, mw := median(bare), median(coldRuns), median(warmRuns)
	row := func(name string, d time.Duration) string {
		return fmt.Sprintf("%-46s %9s  %5.2fx  %+9s", name, d.Round(10*time.Microsecond), float64(d)/float64(mb), (d - mb).Round(10*time.Microsecond))
	}
	t.Logf("median of %d samples each, process backend\n%-46s %9s  %6s  %9s\n%s\n%s\n%s", len(bare), "", "median", "ratio", "vs bare",
		row("bare "+py+" -I -c pass", mb), row("trivial execution, cold start", mc), row("trivial execution, warm child (Warm: 1)", mw))
	fmt.Fprintf(os.Stderr, "BENCH bare_python=%s cold=%s (%.2fx) warm=%s (%.2fx) samples=%d\n",
		mb, mc, float64(mc)/float64(mb), mw, float64(mw)/float64(mb), len(bare))
}
