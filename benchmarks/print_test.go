//go:build linux

package benchmarks

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/namespaces"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/process"
)

// printedBytes is what the large-print program writes: 100 MiB in lines of 100 bytes.
const printedBytes = 100 << 20

var printProgram = fmt.Sprintf("line = 'x' * 99\nfor _ in range(%d):\n    print(line)\n", printedBytes/100)

// TestReportLargePrint prints the throughput of a program printing 100 MiB of lines through
// the sandbox (whose stdout must survive a kill, engine.FlushGrace) beside the same program
// run bare into a pipe the host drains, and the same again line-buffered: the price a flush
// per line would have cost, and why the bootstrap keeps CPython's block buffering.
func TestReportLargePrint(t *testing.T) {
	ctx := context.Background()
	pb, err := process.New(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	py := pb.Python()
	type subject struct {
		name string
		run  func() time.Duration
		runs []time.Duration
	}
	bare := func(args ...string) func() time.Duration {
		return func() time.Duration {
			cmd := exec.Command(py, append([]string{"-I"}, args...)...)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			n, _ := io.Copy(io.Discard, out)
			if err := cmd.Wait(); err != nil || n != printedBytes {
				t.Fatalf("bare print: %v, %d bytes", err, n)
			}
			return time.Since(start)
		}
	}
	sandboxed := func(b engine.Backend) func() time.Duration {
		r, err := engine.NewRunner(b, &engine.RunnerOptions{AllowSameUID: os.Geteuid() != 0,
			Ceiling: engine.Limits{CPUSeconds: 120, WallSeconds: 120, MemoryBytes: 1 << 30, FileSizeBytes: 1 << 20, ProcessCount: 64}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return func() time.Duration {
			start := time.Now()
			res := r.Run(ctx, engine.Execution{Program: printProgram})
			d := time.Since(start)
			if res.Failure != nil || res.StdoutSize != printedBytes {
				t.Fatalf("sandboxed print: %+v, %d bytes", res.Failure, res.StdoutSize)
			}
			return d
		}
	}
	subjects := []*subject{
		{name: "bare python3 -I, block-buffered (baseline)", run: bare("-c", printProgram)},
		{name: "bare python3 -I, line-buffered (not used)", run: bare("-c", "import sys; sys.stdout.reconfigure(line_buffering=True)\n"+printProgram)},
		{name: "process level", run: sandboxed(pb)},
	}
	if ok, why := namespaces.Available(nil); ok {
		nb, err := namespaces.New(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		subjects = append(subjects, &subject{name: "isolated level (namespaces)", run: sandboxed(nb)})
	} else {
		t.Logf("isolated level not measured: %s", why)
	}
	n := 1
	if *report {
		n = 5
	}
	for range n {
		for _, s := range subjects {
			s.runs = append(s.runs, s.run())
		}
	}
	base := median(subjects[0].runs)
	mibps := func(d time.Duration) float64 { return float64(printedBytes) / float64(1<<20) / d.Seconds() }
	out := fmt.Sprintf("100 MiB printed in lines of 100 bytes, median of %d samples each\n%-46s %9s  %9s  %6s\n", n, "", "time", "MiB/s", "ratio")
	for _, s := range subjects {
		d := median(s.runs)
		out += fmt.Sprintf("%-46s %9s  %9.1f  %5.2fx\n", s.name, d.Round(time.Millisecond), mibps(d), float64(d)/float64(base))
	}
	t.Log(out)
	fmt.Fprintln(os.Stderr, out)
}
