package sqlite

import (
	"fmt"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/budget/ledgertest"
	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
)

// benchLedger opens a ledger in the benchmark's temporary directory, closed when it ends.
func benchLedger(b *testing.B) *Ledger {
	b.Helper()
	l, err := Open(b.Context(), b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

// BenchmarkExecutionReads measures the reads the server makes at the end of every execution
// (the Run's usage and its context economy) in a Run that already holds 1 and 500 ended
// executions, as a long session's does.
func BenchmarkExecutionReads(b *testing.B) {
	for _, n := range []int{1, 500} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchmarkExecutionReads(b, n) })
	}
}

func benchmarkExecutionReads(b *testing.B, n int) {
	l := benchLedger(b)
	ctx := b.Context()
	run := budget.RunRef{Tenant: "t", ID: "r"}
	for i := range n {
		id := fmt.Sprintf("x%d", i)
		if _, err := l.StartExecution(ctx, run, id, "v"); err != nil {
			b.Fatal(err)
		}
		if _, err := l.EndExecution(ctx, budget.ExecutionEnd{ID: id, Status: "completed", Context: telemetry.Context{BindingBytes: 3, ReturnedBytes: 1, KeptOutBytes: 2}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := l.RunUsage(ctx, run); err != nil {
			b.Fatal(err)
		}
		c, err := l.RunContext(ctx, run)
		if err != nil || c.KeptOutBytes != 2*int64(n) {
			b.Fatal(c, err)
		}
	}
}

// BenchmarkBindingCallRecords measures the records of one binding call as a program's
// sequential calls write them: tool_call_started committed (with the previous call's
// tool_call_finished riding along), then tool_call_finished queued on a goroutine of its own,
// as package binding does.
func BenchmarkBindingCallRecords(b *testing.B) {
	l := benchLedger(b)
	ctx := b.Context()
	run := budget.RunRef{Tenant: "t", ID: "r"}
	if _, err := l.StartExecution(ctx, run, "x", "v"); err != nil {
		b.Fatal(err)
	}
	limits := budget.Limits{MaxCalls: 1 << 40, MaxTotalBytes: 1 << 50, MaxProducedBytes: 1 << 50}
	var finishing sync.WaitGroup
	created := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(created)
	before := created[0].Value.Uint64()
	cpu0 := processCPU(b)
	i := 0
	for b.Loop() {
		i++
		id := fmt.Sprintf("c%d", i)
		if _, err := l.StartCall(ctx, budget.CallStart{ID: id, Run: run, ExecutionID: "x", Tool: "mock__add", ArgumentBytes: 13}, limits); err != nil {
			b.Fatal(err)
		}
		finishing.Go(func() {
			if err := l.FinishCallLater(ctx, budget.CallFinish{ID: id, Status: budget.Succeeded, Usage: budget.Usage{TransferBytes: 1, ProducedBytes: 60}}); err != nil {
				b.Error(err)
			}
		})
	}
	b.StopTimer()
	if err := l.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	finishing.Wait()
	metrics.Read(created)
	// The goroutines a call's records start: the finish's own (as package binding's), the
	// batch's transaction's (database/sql's), and any the driver starts per statement.
	b.ReportMetric(float64(created[0].Value.Uint64()-before)/float64(i), "goroutines/call")
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(i), "cpu-ns/op")
}

// BenchmarkExecutionLedger measures what the run ledger costs one execution as the server
// records it (ledgertest.BenchmarkExecutionLedger), with the process's CPU an execution
// (getrusage, the ledger's goroutines included), which other load on the machine does not blur.
func BenchmarkExecutionLedger(b *testing.B) {
	l := benchLedger(b)
	cpu0 := processCPU(b)
	ledgertest.BenchmarkExecutionLedger(b, l)
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkBindingCallRecordsConcurrent is BenchmarkBindingCallRecords with eight programs'
// calls at once, each in an execution of its own in one Run, as eight programs of one
// session make them: their tool_call_started records may share a commit (batch.go).
func BenchmarkBindingCallRecordsConcurrent(b *testing.B) {
	l := benchLedger(b)
	ctx := b.Context()
	run := budget.RunRef{Tenant: "t", ID: "r"}
	limits := budget.Limits{MaxCalls: 1 << 40, MaxTotalBytes: 1 << 50, MaxProducedBytes: 1 << 50}
	var next atomic.Int64
	var finishing sync.WaitGroup
	cpu0 := processCPU(b)
	b.SetParallelism(4) // 8 goroutines on 2 Ps
	b.RunParallel(func(pb *testing.PB) {
		x := fmt.Sprintf("x%d", next.Add(1))
		if _, err := l.StartExecution(ctx, run, x, "v"); err != nil {
			b.Error(err)
			return
		}
		for pb.Next() {
			id := fmt.Sprintf("c%d", next.Add(1))
			if _, err := l.StartCall(ctx, budget.CallStart{ID: id, Run: run, ExecutionID: x, Tool: "mock__add", ArgumentBytes: 13}, limits); err != nil {
				b.Error(err)
				return
			}
			finishing.Go(func() {
				if err := l.FinishCallLater(ctx, budget.CallFinish{ID: id, Status: budget.Succeeded, Usage: budget.Usage{TransferBytes: 1, ProducedBytes: 60}}); err != nil {
					b.Error(err)
				}
			})
		}
	})
	b.StopTimer()
	finishing.Wait()
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}
