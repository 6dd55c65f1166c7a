//go:build linux

package benchmarks

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// serveConfig writes a config for one tenant and agent with the default profile, whose warm
// pool is warm (a YAML flow mapping, or "" for the defaults).
func serveConfig(t *testing.T, warm string) string {
	t.Helper()
	w := ""
	if warm != "" {
		w = "    warm: " + warm + "\n"
	}
	return testkit.WriteConfig(t, fmt.Sprintf(`
data_dir: %q
`+benchProfile+`%stenants:
  t:
    agents:
      default: {code_execution: {}}
`, t.TempDir(), w))
}

func loadAverage() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// percentile returns the p-th percentile (0-100) of d, nearest rank.
func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func runCode(t *testing.T, cs *mcp.ClientSession, code string) (time.Duration, *mcp.CallToolResult) {
	t.Helper()
	start := time.Now()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": code}})
	d := time.Since(start)
	if err != nil {
		t.Fatalf("run_code: %v", err)
	}
	if res.IsError {
		t.Fatalf("run_code failed: %s", testkit.Text(res))
	}
	return d, res
}

// barePython starts `python3 -I -c pass` n times, the baseline the figures sit beside, and
// returns each start's wall time and CPU time (user and system, as the kernel counts the
// process).
func barePython(t *testing.T, n int) (wall, cpu []time.Duration) {
	t.Helper()
	for range n {
		cmd := exec.Command("/usr/bin/python3", "-I", "-c", "pass")
		start := time.Now()
		err := cmd.Run()
		gate.Require(t, "python", err == nil, fmt.Sprintf("no /usr/bin/python3 for the baseline: %v", err))
		wall = append(wall, time.Since(start))
		cpu = append(cpu, cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
	}
	return wall, cpu
}

// warmStarts are the profile's warm.start values the server reports run with: auto (the
// default), which forks the namespaces backend's warm children from templates where this host
// allows it, and exec, which starts an interpreter for each, measured in the same run.
var warmStarts = []string{"auto", "exec"}

// startKinds counts how the children of results were made (the result's start block): a
// report says whether its figures are of forked or exec'd children.
type startKinds struct {
	mu sync.Mutex
	n  map[string]int
}

func (k *startKinds) add(res *mcp.CallToolResult) {
	kind := "none"
	if m, ok := res.StructuredContent.(map[string]any); ok {
		if st, ok := m["start"].(map[string]any); ok {
			kind, _ = st["kind"].(string)
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.n == nil {
		k.n = map[string]int{}
	}
	k.n[kind]++
}

func (k *startKinds) String() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var parts []string
	for _, kind := range slices.Sorted(maps.Keys(k.n)) {
		parts = append(parts, fmt.Sprintf("%s %d", kind, k.n[kind]))
	}
	return strings.Join(parts, ", ")
}

// TestReportStdioLatency prints the end-to-end time of back-to-back run_code calls of `6*7`
// over stdio (a host's view: request sent to result received), with the default warm pool,
// once for each of warmStarts: median, p90, p99 and max, and how the children were made. A
// bare interpreter start is measured before and after, for scale: the median and p99 are set
// beside its wall time, and the CPU each execution cost the server and its sandbox children
// together (processCPU, which other load on the machine does not blur) beside its CPU time.
func TestReportStdioLatency(t *testing.T) {
	sandbox := testkit.Binary(t)
	for _, start := range warmStarts {
		t.Run(start, func(t *testing.T) {
			cmd := exec.Command(sandbox, "serve", "--config", serveConfig(t, "{start: "+start+"}"))
			cs := connect(t, cmd)
			for range 10 { // warm the session, the caches and the pool
				runCode(t, cs, "6*7")
			}
			n := 40
			if *report {
				n = 500
			}
			load := loadAverage()
			bare, bareCPU := barePython(t, 10)
			var d []time.Duration
			var kinds startKinds
			self0, child0 := processCPU(t, cmd.Process.Pid)
			for range n {
				rd, res := runCode(t, cs, "6*7")
				d = append(d, rd)
				kinds.add(res)
			}
			self1, child1 := processCPU(t, cmd.Process.Pid)
			bareAfter, bareCPUAfter := barePython(t, 10)
			// The baseline: the median of the starts before and after together.
			bareWall, bareCPUMedian := median(append(bare, bareAfter...)), median(append(bareCPU, bareCPUAfter...))
			perExec := (self1 - self0 + child1 - child0) / time.Duration(n)
			ratio := func(d time.Duration) float64 { return float64(d) / float64(bareWall) }
			out := fmt.Sprintf("back-to-back run_code of 6*7 over stdio, %d calls, default warm pool, warm.start %s (load average %s, then %s)\n", n, start, load, loadAverage()) +
				fmt.Sprintf("  median %8s  p90 %8s  p99 %8s  max %8s\n", median(d).Round(10*time.Microsecond),
					percentile(d, 90).Round(10*time.Microsecond), percentile(d, 99).Round(10*time.Microsecond), slices.Max(d).Round(10*time.Microsecond)) +
				fmt.Sprintf("  children: %s\n", &kinds) +
				fmt.Sprintf("  a bare /usr/bin/python3 -I -c pass, median of %d before and after: %s, CPU %s (%s before, %s after)\n", len(bare)+len(bareAfter),
					bareWall.Round(10*time.Microsecond), bareCPUMedian.Round(10*time.Microsecond), median(bare).Round(10*time.Microsecond),
					median(bareAfter).Round(10*time.Microsecond)) +
				fmt.Sprintf("  median %.2fx a bare start's wall (target <= 0.25x), p99 %.2fx (target <= 1x)\n", ratio(median(d)), ratio(percentile(d, 99))) +
				cpuPerExecution(self0, child0, self1, child1, int64(n)) +
				fmt.Sprintf("  CPU per execution, server and children together, %s: %.2fx a bare start's CPU (target <= 0.4x, forked)\n",
					perExec.Round(10*time.Microsecond), float64(perExec)/float64(bareCPUMedian))
			t.Log(out)
			fmt.Fprintln(os.Stderr, out)
		})
	}
}

// httpServer starts `mcp-sandbox serve --transport http` on a free loopback port and returns
// its /mcp URL and the process.
func httpServer(t *testing.T, sandbox, cfg string) (string, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(sandbox, "serve", "--transport", "http", "--listen", "127.0.0.1:0", "--config", cfg)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	urls := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`url=(http://\S+/mcp)`)
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil && !sent {
				urls <- m[1]
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	select {
	case u := <-urls:
		return u, cmd
	case <-time.After(60 * time.Second):
		t.Fatal("the HTTP server did not say where it listens within 60s")
	}
	return "", nil
}

func httpClient(t *testing.T, url string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// throughputConcurrency is how many clients run programs at once.
const throughputConcurrency = 8

// TestReportHTTPThroughput prints executions per second of run_code `6*7` with eight clients
// at once over streamable HTTP on loopback, and the errors (any is one too many), beside the
// rate at which the same cores start a bare interpreter back to back right after (one loop
// per core), as a ratio that holds on slower machines, once for each of warmStarts. The
// profile's warm pool may grow to 16 children, room for the eight in flight and their refills.
func TestReportHTTPThroughput(t *testing.T) {
	sandbox := testkit.Binary(t)
	for _, start := range warmStarts {
		t.Run(start, func(t *testing.T) { httpThroughput(t, sandbox, start) })
	}
}

func httpThroughput(t *testing.T, sandbox, start string) {
	url, cmd := httpServer(t, sandbox, serveConfig(t, "{min: 8, max: 16, idle_seconds: 300, start: "+start+"}"))
	var clients []*mcp.ClientSession
	for range throughputConcurrency {
		cs := httpClient(t, url)
		runCode(t, cs, "6*7")
		clients = append(clients, cs)
	}
	dur := 3 * time.Second
	if *report {
		dur = 20 * time.Second
	}
	load := loadAverage()
	var ok, failed atomic.Int64
	var kinds startKinds
	var lat []time.Duration
	var mu sync.Mutex
	var wg sync.WaitGroup
	self0, child0 := processCPU(t, cmd.Process.Pid)
	deadline := time.Now().Add(dur)
	began := time.Now()
	for _, cs := range clients {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				s := time.Now()
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": "6*7"}})
				d := time.Since(s)
				if err != nil || res.IsError || !strings.Contains(testkit.Text(res), "value: 42") {
					failed.Add(1)
					continue
				}
				ok.Add(1)
				kinds.add(res)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	el := time.Since(began)
	self1, child1 := processCPU(t, cmd.Process.Pid)
	rate := float64(ok.Load()) / el.Seconds()
	bareRate := bareStartRate(t, dur/2)
	out := fmt.Sprintf("run_code of 6*7 over streamable HTTP, %d clients at once for %s, warm.start %s (load average %s, then %s)\n",
		throughputConcurrency, el.Round(time.Millisecond), start, load, loadAverage()) +
		fmt.Sprintf("  %.1f executions/s, %d completed, %d errors; children: %s\n", rate, ok.Load(), failed.Load(), &kinds)
	if len(lat) > 0 {
		out += fmt.Sprintf("  per execution: median %s, p99 %s\n", median(lat).Round(10*time.Microsecond), percentile(lat, 99).Round(10*time.Microsecond))
	}
	out += cpuPerExecution(self0, child0, self1, child1, ok.Load()+failed.Load())
	out += fmt.Sprintf("  bare /usr/bin/python3 -I -c pass started back to back, one loop per core (%d), right after: %.1f/s; executions/s %.2fx that (target >= 1.5x, forked)\n",
		runtime.NumCPU(), bareRate, rate/bareRate)
	t.Log(out)
	fmt.Fprintln(os.Stderr, out)
	if failed.Load() > 0 {
		t.Errorf("%d executions failed", failed.Load())
	}
}

// bareStartRate is how many bare `python3 -I -c pass` the machine's cores start a second,
// one loop per core running them back to back for d: the rate the throughput is set beside,
// as the same cores make it in the same run.
func bareStartRate(t *testing.T, d time.Duration) float64 {
	t.Helper()
	var n atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for range runtime.NumCPU() {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				if exec.Command("/usr/bin/python3", "-I", "-c", "pass").Run() == nil {
					n.Add(1)
				}
			}
		})
	}
	wg.Wait()
	gate.Require(t, "python", n.Load() > 0, "no /usr/bin/python3 for the baseline")
	return float64(n.Load()) / time.Since(start).Seconds()
}

// processCPU is the CPU time a process has used itself, and the CPU time of the tree under
// it: its children's that it has waited for (cutime+cstime of /proc/pid/stat), plus every
// live descendant's own and its waited-for children's. A forked child is a template's
// child, not the server's: its CPU reaches the server's children time only when its template
// ends, so the live templates' times are what count it. An exec'd child's init helper reaps
// its interpreter before the server reaps it. Each ended process is counted once, by whoever
// waited for it; other engineers' load on the machine is in neither figure.
func processCPU(t *testing.T, pid int) (self, children time.Duration) {
	t.Helper()
	stats := map[int][]string{} // pid: the fields of /proc/pid/stat after the name
	parent := map[int]int{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // ended meanwhile
		}
		// The command name, in parentheses, may hold spaces and parentheses: fields are
		// counted after the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if f := strings.Fields(string(b[i+1:])); i >= 0 && len(f) >= 15 {
			stats[p] = f
			parent[p], _ = strconv.Atoi(f[1])
		}
	}
	f, ok := stats[pid]
	if !ok {
		t.Fatalf("cannot read /proc/%d/stat", pid)
	}
	tick := func(f []string, i int) time.Duration {
		n, _ := strconv.ParseInt(f[i], 10, 64)
		return time.Duration(n) * time.Second / clockTicks
	}
	// Fields 14-17 of proc(5) (utime, stime, cutime, cstime) are 11-14 after the name.
	self, children = tick(f, 11)+tick(f, 12), tick(f, 13)+tick(f, 14)
	under := func(p int) bool {
		for seen := 0; p > 1 && seen < 64; seen++ {
			if p = parent[p]; p == pid {
				return true
			}
		}
		return false
	}
	for p, f := range stats {
		if under(p) {
			children += tick(f, 11) + tick(f, 12) + tick(f, 13) + tick(f, 14)
		}
	}
	return self, children
}

// clockTicks is USER_HZ, the unit of /proc/pid/stat's times: 100 on every Linux ABI Go
// supports.
const clockTicks = 100

// cpuPerExecution says how much CPU the server spent per execution between two processCPU
// readings, itself and its children.
func cpuPerExecution(self0, child0, self1, child1 time.Duration, n int64) string {
	if n <= 0 {
		return ""
	}
	per := func(d time.Duration) time.Duration { return (d / time.Duration(n)).Round(10 * time.Microsecond) }
	return fmt.Sprintf("  CPU per execution: the server's own %s, its sandbox children's %s\n", per(self1-self0), per(child1-child0))
}

// procStatus reads a field of /proc/pid/status in KiB (VmRSS, VmHWM).
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// sampleRSS reads pid's VmRSS every interval until the returned peak is called, which stops
// the sampling and returns the highest value read (KiB).
func sampleRSS(t *testing.T, pid int, every time.Duration) (peak func() int64) {
	var high atomic.Int64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(every):
			}
			if v := procStatus(t, pid, "VmRSS"); v > high.Load() {
				high.Store(v)
			}
		}
	})
	return func() int64 {
		close(stop)
		sampler.Wait()
		return high.Load()
	}
}

// TestReportHostCost prints what executions cost the server process: its resident memory
// with 16 programs running at once beside idle, per execution; and how much its peak resident
// memory grows while one program prints 1 GiB (all of it counted, 8 MiB of it kept).
func TestReportHostCost(t *testing.T) {
	sandbox := testkit.Binary(t)
	const k = 16
	url, cmd := httpServer(t, sandbox, serveConfig(t, "{min: 16, max: 16, idle_seconds: 300}"))
	pid := cmd.Process.Pid
	var clients []*mcp.ClientSession
	for range k {
		cs := httpClient(t, url)
		runCode(t, cs, "6*7")
		clients = append(clients, cs)
	}
	time.Sleep(2 * time.Second) // the pool refilled, the heap settled
	idle := procStatus(t, pid, "VmRSS")
	peakRSS := sampleRSS(t, pid, 20*time.Millisecond)
	var wg sync.WaitGroup
	for _, cs := range clients {
		wg.Go(func() { runCode(t, cs, "import time\ntime.sleep(3)\n6*7") })
	}
	wg.Wait()
	peak := peakRSS()
	perExec := float64(peak-idle) / k / 1024

	hwm := procStatus(t, pid, "VmHWM")
	rss := procStatus(t, pid, "VmRSS")
	_, res := runCode(t, clients[0], "import sys\nline = 'x' * 1023 + '\\n'\nchunk = line * 1024\nfor _ in range(1024):\n    sys.stdout.write(chunk)\nsys.stdout.flush()\n'printed'")
	if !strings.Contains(testkit.Text(res), "1073741824 bytes") {
		t.Fatalf("the 1 GiB print did not report its size: %s", testkit.Text(res))
	}
	hwmAfter := procStatus(t, pid, "VmHWM")
	out := fmt.Sprintf("the server process's memory (load average %s)\n", loadAverage()) +
		fmt.Sprintf("  %d programs running at once: resident %.1f MiB idle, %.1f MiB at peak: %.2f MiB per execution\n",
			k, float64(idle)/1024, float64(peak)/1024, perExec) +
		fmt.Sprintf("  one program printing 1 GiB: peak resident %.1f MiB before (%.1f MiB resident), %.1f MiB after: grew %.1f MiB\n",
			float64(hwm)/1024, float64(rss)/1024, float64(hwmAfter)/1024, float64(max(hwmAfter-max(hwm, rss), 0))/1024)
	t.Log(out)
	fmt.Fprintln(os.Stderr, out)
}
