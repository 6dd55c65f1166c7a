//go:build linux

package benchmarks

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/budget/postgres"
	"github.com/mcp-sandbox/mcp-sandbox/budget/sqlite"
	"github.com/mcp-sandbox/mcp-sandbox/internal/pgdb/pgtest"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
	"github.com/mcp-sandbox/mcp-sandbox/telemetry"
)

// ledgerConcurrency is how many goroutines share one Run in the concurrent figure: calls of
// one program racing (asyncio.gather), or of one Run's executions on several replicas.
const ledgerConcurrency = 8

// TestReportLedger prints what the run ledger costs one binding call, SQLite beside
// PostgreSQL: Meter.Admit (tool_call_started, the budget check) plus Ticket.Finish
// (tool_call_finished, the bytes), one call after another, and with ledgerConcurrency
// goroutines admitting calls on the same Run at once.
func TestReportLedger(t *testing.T) {
	ctx := context.Background()
	lite, err := sqlite.Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	dsn := pgtest.Schema(t)
	pg, err := postgres.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	// SQLite's WAL with synchronous=NORMAL does not wait for the disk at each commit;
	// PostgreSQL does, unless the DSN turns it off for the ledger's sessions.
	pgAsync, err := postgres.Open(ctx, pgtest.WithParam(dsn, "synchronous_commit", "off"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pgAsync.Close()

	calls := 50
	if *report {
		calls = 400
	}
	n := samples()
	ledgers := []struct {
		name string
		l    budget.Ledger
		seq  []time.Duration
		conc []time.Duration
	}{{name: "SQLite (baseline)", l: lite}, {name: "PostgreSQL", l: pg},
		{name: "PostgreSQL, synchronous_commit=off", l: pgAsync}}
	for i := range n {
		for j := range ledgers {
			led := &ledgers[j]
			led.seq = append(led.seq, perCall(t, led.l, fmt.Sprint("seq", i), calls, 1))
			led.conc = append(led.conc, perCall(t, led.l, fmt.Sprint("conc", i), calls, ledgerConcurrency))
		}
	}
	base := ledgers[0]
	out := fmt.Sprintf("run ledger per binding call (admit + finish), median of %d samples of %d calls\n", n, calls) +
		fmt.Sprintf("%-36s %14s %7s %24s %7s\n", "", "one at a time", "ratio", fmt.Sprintf("%d at once (wall/call)", ledgerConcurrency), "ratio")
	for _, l := range ledgers {
		s, c := median(l.seq), median(l.conc)
		out += fmt.Sprintf("%-36s %14s %6.2fx %24s %6.2fx\n", l.name, s.Round(time.Microsecond), float64(s)/float64(median(base.seq)),
			c.Round(time.Microsecond), float64(c)/float64(median(base.conc)))
	}
	t.Log(out)
	fmt.Fprintln(os.Stderr, out)
}

// perCall runs calls binding calls' ledger work on a fresh Run of l, from workers goroutines,
// and returns the wall time per call.
func perCall(t *testing.T, l budget.Ledger, run string, calls, workers int) time.Duration {
	ctx := context.Background()
	m, err := budget.Start(ctx, l, budget.RunRef{Tenant: "bench", ID: run + budget.NewID("_")}, "", "", budget.Limits{MaxCalls: calls})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			for i := w; i < calls; i += workers {
				tk, fe := m.Admit(ctx, budget.Call{Tool: "mock__add", ArgumentBytes: 16})
				if fe != nil {
					t.Errorf("admit: %v", fe)
					return
				}
				if err := tk.Finish(ctx, budget.CallFinish{Status: budget.Succeeded, Usage: budget.Usage{ProducedBytes: 40, TransferBytes: 40}}); err != nil {
					t.Errorf("finish: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	d := time.Since(start) / time.Duration(calls)
	if _, err := m.End(ctx, "completed", nil, telemetry.Context{}); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestReportLedgerBindings prints the time of 1,000 sequential binding calls made by one
// program through mcp-sandbox with its ledger on SQLite (the baseline) and on PostgreSQL: what
// the ledger's cost is worth beside everything else a binding call does.
func TestReportLedgerBindings(t *testing.T) {
	pgDSN := pgtest.Schema(t)
	sandbox, mock := testkit.Binary(t), testkit.MockUpstream(t)
	serve := func(cfgPath string, env ...string) *mcp.ClientSession {
		cmd := exec.Command(sandbox, "serve", "--config", cfgPath)
		cmd.Env = append(os.Environ(), env...)
		return connect(t, cmd)
	}
	hosts := []struct {
		name string
		cs   *mcp.ClientSession
		runs []time.Duration
	}{
		{name: "ledger on SQLite (baseline)", cs: serve(bindingConfig(t, mock, ""))},
		{name: "ledger on PostgreSQL", cs: serve(bindingConfig(t, mock, "ledger: {postgres: {dsn: {env: BENCH_PG_DSN}}}"), "BENCH_PG_DSN="+pgDSN)},
	}
	ctx := context.Background()
	runCode := func(cs *mcp.ClientSession, code string) time.Duration {
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": code}})
		d := time.Since(start)
		if err != nil || res.IsError {
			t.Fatalf("run_code: %v %v", err, res)
		}
		return d
	}
	program := fmt.Sprintf("for i in range(%d):\n    await mock__add(a=i, b=1)\n", bindingCalls)
	for _, h := range hosts {
		runCode(h.cs, "await mock__add(a=1, b=1)") // warm the upstream session and the pool
	}
	n := min(samples(), 10)
	for range n {
		for i := range hosts {
			hosts[i].runs = append(hosts[i].runs, runCode(hosts[i].cs, program))
		}
	}
	base := median(hosts[0].runs)
	out := fmt.Sprintf("median of %d samples, one program making %d sequential binding calls of the mock's add\n", n, bindingCalls)
	for _, h := range hosts {
		m := median(h.runs)
		out += fmt.Sprintf("%-32s %10s  %9s/call  %5.2fx\n", h.name, m.Round(time.Millisecond),
			(m / bindingCalls).Round(100*time.Nanosecond), float64(m)/float64(base))
	}
	t.Log(out)
	fmt.Fprintln(os.Stderr, out)
}
