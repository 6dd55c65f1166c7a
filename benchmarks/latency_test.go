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

// TestReport prints the median latency of a trivial execution through the engine beside a
// bare interpreter start, sampled alternately so both see the same machine.
func TestReport(t *testing.T) {
	ctx := context.Background()
	b, err := process.New(ctx, process.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := engine.NewRunner(b, engine.RunnerOptions{AllowSameUID: os.Geteuid() != 0})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	py := b.Python()
	var bare, engineRun []time.Duration
	for i := 0; i < samples()+2; i++ {
		start := time.Now()
		if err := exec.Command(py, "-I", "-c", "pass").Run(); err != nil {
			t.Fatal(err)
		}
		d1 := time.Since(start)
		start = time.Now()
		res := r.Run(ctx, engine.Execution{Program: "pass"})
		d2 := time.Since(start)
		if res.Failure != nil {
			t.Fatalf("%s: %s", res.Failure.Kind, res.Failure.Message)
		}
		if i >= 2 { // the first runs warm caches
			bare, engineRun = append(bare, d1), append(engineRun, d2)
		}
	}
	mb, me := median(bare), median(engineRun)
	t.Logf("\n%-44s %10s\n%-44s %10s\n%-44s %10s  (%.2fx, +%s)",
		"bare "+py+" -I -c pass", mb.Round(10*time.Microsecond),
		"trivial execution, process backend", me.Round(10*time.Microsecond),
		"", "", float64(me)/float64(mb), (me - mb).Round(10*time.Microsecond))
	fmt.Fprintf(os.Stderr, "BENCH process_trivial_median=%s bare_python_median=%s ratio=%.2f delta=%s samples=%d\n",
		me, mb, float64(me)/float64(mb), me-mb, len(bare))
}
