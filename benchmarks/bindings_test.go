//go:build linux

package benchmarks

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// bindingCalls is how many sequential calls each side makes.
const bindingCalls = 1000

// bindingConfig writes a config serving one agent of tenant t, granted the mock upstream,
// with budgets no benchmark reaches and room for concurrentPrograms programs at once (a
// tenant's default is four: the fifth would wait for a slot, and eight programs would run as
// two waves of four, docs/design.md §19.12); extra is added at the top level (a ledger, say).
func bindingConfig(t *testing.T, mock, extra string) string {
	t.Helper()
	return testkit.WriteConfig(t, fmt.Sprintf(`
data_dir: %q
%s
`+benchProfile+`    hard_limits: {wall_seconds: 120}
    binding_budget: {max_calls: 1000000, max_total_bytes: 1GiB, max_produced_bytes: 1GiB}
upstreams:
  mock: {command: [%q]}
tenants:
  t:
    upstreams: [mock]
    policy: {quotas: {max_concurrent_executions: %d}}
    agents:
      default: {code_execution: {limits: {wall_seconds: 120}}}
`, t.TempDir(), extra, mock, concurrentPrograms))
}

func connect(t *testing.T, cmd *exec.Cmd) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect %s: %v", cmd.Path, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestReportBindings prints the time of 1,000 sequential binding calls made by one program
// (through mcp-sandbox, the sandbox child and the host) beside 1,000 direct calls from a Go
// MCP client to the same mock upstream, and the ratio. The program's figure includes one
// run_code's fixed cost (starting the child), shown separately as an empty program, and
// two floors under a call measured the same way: a recorded built-in (the round trip and the
// ledger's records) and budget.remaining (the round trip alone); and the server's own CPU a
// call of each (processCPU), which other load on the machine does not blur.
func TestReportBindings(t *testing.T) {
	sandbox, mock := testkit.Binary(t), testkit.MockUpstream(t)
	cfgPath := bindingConfig(t, mock, "")
	direct := connect(t, exec.Command(mock))
	server := exec.Command(sandbox, "serve", "--config", cfgPath)
	host := connect(t, server)
	ctx := context.Background()

	runCode := func(code string) time.Duration {
		start := time.Now()
		res, err := host.CallTool(ctx, &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": code}})
		d := time.Since(start)
		if err != nil || res.IsError {
			t.Fatalf("run_code: %v %v", err, res)
		}
		return d
	}
	directCalls := func() time.Duration {
		start := time.Now()
		for i := range bindingCalls {
			res, err := direct.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": i, "b": 1}})
			if err != nil || res.IsError {
				t.Fatalf("direct add: %v %v", err, res)
			}
		}
		return time.Since(start)
	}
	program := fmt.Sprintf("for i in range(%d):\n    await mock__add(a=i, b=1)\n", bindingCalls)
	// The same loop over a built-in the host answers itself: the program⇄host round trip and
	// the call's ledger records (a built-in is metered as any call), with no upstream: the
	// floor under every binding call.
	builtin := fmt.Sprintf("for i in range(%d):\n    await get_tool_info('mock__add')\n", bindingCalls)
	// The same loop over the one built-in that is neither recorded nor metered: the
	// program⇄host round trip alone (the program's asyncio loop, the frames both ways).
	roundTrip := fmt.Sprintf("for i in range(%d):\n    await budget.remaining()\n", bindingCalls)

	// Warm both sides: the upstream session, the catalogue, the caches.
	runCode("await mock__add(a=1, b=1)")
	directCalls()

	n := min(samples(), 10)
	var viaProgram, viaClient, empty, viaBuiltin, viaRoundTrip []time.Duration
	// The server's own CPU over each kind of loop, summed over the samples.
	var cpuProgram, cpuBuiltin, cpuRoundTrip time.Duration
	serverCPU := func(sum *time.Duration, code string) time.Duration {
		self0, _ := processCPU(t, server.Process.Pid)
		d := runCode(code)
		self1, _ := processCPU(t, server.Process.Pid)
		*sum += self1 - self0
		return d
	}
	for range n {
		empty = append(empty, runCode("pass"))
		viaProgram = append(viaProgram, serverCPU(&cpuProgram, program))
		viaClient = append(viaClient, directCalls())
		viaBuiltin = append(viaBuiltin, serverCPU(&cpuBuiltin, builtin))
		viaRoundTrip = append(viaRoundTrip, serverCPU(&cpuRoundTrip, roundTrip))
	}
	p, c, e, b, r := median(viaProgram), median(viaClient), median(empty), median(viaBuiltin), median(viaRoundTrip)
	per := func(d time.Duration) time.Duration { return (d / bindingCalls).Round(100 * time.Nanosecond) }
	cpuPer := func(sum time.Duration) time.Duration {
		return (sum / time.Duration(n*bindingCalls)).Round(time.Microsecond)
	}
	out := fmt.Sprintf("median of %d samples each, %d sequential calls of the mock's add\n", n, bindingCalls) +
		fmt.Sprintf("%-52s %10s  %9s/call\n", "direct, Go MCP client → mock (baseline)", c.Round(time.Millisecond), per(c)) +
		fmt.Sprintf("%-52s %10s  %9s/call  %5.2fx\n", "one program through mcp-sandbox (whole run_code)", p.Round(time.Millisecond), per(p), float64(p)/float64(c)) +
		fmt.Sprintf("%-52s %10s  %9s/call  %5.2fx\n", "  less an empty run_code ("+e.Round(time.Millisecond).String()+")", (p-e).Round(time.Millisecond), per(p-e), float64(p-e)/float64(c)) +
		fmt.Sprintf("%-52s %10s  %9s/call\n", "a built-in from a program (recorded, no upstream)", (b-e).Round(time.Millisecond), per(b-e)) +
		fmt.Sprintf("%-52s %10s  %9s/call\n", "the round trip alone (budget.remaining: unrecorded)", (r-e).Round(time.Millisecond), per(r-e)) +
		fmt.Sprintf("binding calls %.2fx the direct client's (target <= 2.0x; load average %s)\n", float64(p-e)/float64(c), loadAverage()) +
		fmt.Sprintf("the server's own CPU a call (its execution's share included): %s a mock call, %s a recorded built-in, %s budget.remaining\n",
			cpuPer(cpuProgram), cpuPer(cpuBuiltin), cpuPer(cpuRoundTrip))
	t.Log(out)
	fmt.Fprintln(os.Stderr, out)
}

// benchProfile is the profile every benchmark's server runs its programs under, as the start
// of a config's profiles block: more of the default profile's keys may follow.
const benchProfile = `profiles:
  default:
    backend: local
    isolation: process
    allow_same_uid: true
`

// concurrentPrograms is how many programs call the mock at once, and how many direct clients
// the baseline runs at once.
const concurrentPrograms = 8

// TestReportBindingsConcurrent prints the throughput of binding calls with eight programs
// calling the mock at once (each one run_code of bindingCalls/4 sequential calls with
// -bench-report, over one
// stdio session) beside eight direct Go MCP clients calling mocks of their own at once, in
// turn, as calls a second and their ratio: concurrent calls' tool_call_started records may
// share a commit (budget/sqlite's batches), and the ratio says what is left of the cost.
func TestReportBindingsConcurrent(t *testing.T) {
	sandbox, mock := testkit.Binary(t), testkit.MockUpstream(t)
	server := exec.Command(sandbox, "serve", "--config", bindingConfig(t, mock, ""))
	host := connect(t, server)
	var direct []*mcp.ClientSession
	for range concurrentPrograms {
		direct = append(direct, connect(t, exec.Command(mock)))
	}
	ctx := context.Background()
	calls := 25 // a plain go test keeps the harness from rotting, and no more
	if *report {
		calls = bindingCalls / 4
	}
	program := fmt.Sprintf("for i in range(%d):\n    await mock__add(a=i, b=1)\n", calls)
	// together runs one job per program or client at once and returns the calls a second.
	together := func(job func(i int) error) float64 {
		var wg sync.WaitGroup
		errs := make(chan error, concurrentPrograms)
		start := time.Now()
		for i := range concurrentPrograms {
			wg.Go(func() {
				if err := job(i); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		el := time.Since(start)
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		return float64(concurrentPrograms*calls) / el.Seconds()
	}
	viaPrograms := func(int) error {
		res, err := host.CallTool(ctx, &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": program}})
		if err == nil && res.IsError {
			err = fmt.Errorf("run_code: %s", testkit.Text(res))
		}
		return err
	}
	viaClients := func(i int) error {
		for j := range calls {
			res, err := direct[i].CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": j, "b": 1}})
			if err == nil && res.IsError {
				err = fmt.Errorf("direct add: %s", testkit.Text(res))
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	together(viaPrograms) // warm both sides: the upstream session, the warm pool, the caches
	together(viaClients)
	n := 1
	if *report {
		n = 5
	}
	load := loadAverage()
	var programs, clients []float64
	// The server's own CPU, and its tree's (the programs and the mock), over the programs'
	// rounds: a figure a call that other load on the machine does not blur.
	var cpuSelf, cpuTree time.Duration
	for range n {
		self0, tree0 := processCPU(t, server.Process.Pid)
		programs = append(programs, together(viaPrograms))
		self1, tree1 := processCPU(t, server.Process.Pid)
		cpuSelf, cpuTree = cpuSelf+self1-self0, cpuTree+tree1-tree0
		clients = append(clients, together(viaClients))
	}
	p, c := medianOf(programs), medianOf(clients)
	perCall := func(d time.Duration) time.Duration {
		return (d / time.Duration(n*concurrentPrograms*calls)).Round(time.Microsecond)
	}
	out := fmt.Sprintf("%d programs at once, %d sequential calls of the mock's add each, beside %d direct clients at once; median of %d (load average %s, then %s)\n",
		concurrentPrograms, calls, concurrentPrograms, n, load, loadAverage()) +
		fmt.Sprintf("  direct, %d Go MCP clients → %d mocks (baseline)   %8.0f calls/s\n", concurrentPrograms, concurrentPrograms, c) +
		fmt.Sprintf("  %d programs through mcp-sandbox → one mock          %8.0f calls/s  %.2fx (target >= 0.7x)\n", concurrentPrograms, p, p/c) +
		fmt.Sprintf("  CPU a call through the programs: the server's own %s, the programs' and the mock's %s\n", perCall(cpuSelf), perCall(cpuTree))
	t.Log(out)
	fmt.Fprintln(os.Stderr, out)
}

// medianOf is the median of xs.
func medianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
