package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/pgdb/pgtest"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// Scale-out (issue 16, docs/design.md §8): three `serve --transport http` replicas on loopback
// share a PostgreSQL ledger and blob store behind HAProxy from Debian, which the test
// configures and runs itself: round robin, and affinity on Mcp-Session-Id for sessions of
// 2025-11-25 (the session id a replica answers with is stored, and a request naming it goes
// back there). Requests of 2026-07-28 carry no session and land wherever the balancer sends
// them. The upstream is one mock (mockupstream --http) all replicas share, so its counter is
// the number of deliveries whichever replica made them.

// replicaToken is the test-only bearer token of tenant t in replicaConfig.
const replicaToken = "replicas-conformance-token"

// leaseSeconds is the replicas' lease: short, so a killed replica's call is recorded unknown
// within seconds.
const leaseSeconds = 3

// headerReplica is the response header HAProxy adds: the name of the replica that answered.
const headerReplica = "X-Mcp-Replica"

// cluster is three replicas behind HAProxy, with the shared mock upstream and database.
type cluster struct {
	url      string // the balancer's /mcp
	stats    string // HAProxy's CSV statistics
	dsn      string
	cfg      string // the replicas' config file
	mock     string // the mock's /mcp
	replicas []*replica
}

type replica struct {
	name string
	cmd  *exec.Cmd
	addr string
	log  *testkit.Log
	done chan struct{} // closed when the process has been waited for
}

func replicaConfig(mockURL string) string {
	return fmt.Sprintf(`
data_dir: "-"
ledger: {postgres: {dsn: {env: MCP_SANDBOX_PG_DSN}, lease_seconds: %d}}
blobs:  {postgres: {dsn: {env: MCP_SANDBOX_PG_DSN}}}
`+processProfile+`    hard_limits: {wall_seconds: 120, memory_bytes: 1GiB}
    binding_budget: {max_calls: 10}
    output: {preview_bytes: 4000}
upstreams:
  support: {url: %q}
tenants:
  t:
    tokens: [%q]
    upstreams: [support]
    policy: {deny: ["support__class"]}
    agents:
      default:
        code_execution: {limits: {wall_seconds: 120}}
`, leaseSeconds, mockURL, configs.HashToken(replicaToken))
}

// startCluster starts the mock, three replicas and HAProxy; everything is stopped when t ends.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	haproxy, err := exec.LookPath("haproxy")
	gate.Require(t, "haproxy", err == nil, "haproxy is not installed (apt-get install haproxy)")
	c := &cluster{dsn: pgtest.Schema(t)}
	c.mock = startHTTPMock(t) + "/mcp"
	c.cfg = testkit.WriteConfig(t, replicaConfig(c.mock))
	for i := range 3 {
		c.replicas = append(c.replicas, startReplica(t, fmt.Sprintf("r%d", i+1), c.cfg, c.dsn))
	}
	c.url, c.stats = startHAProxy(t, haproxy, c.replicas)
	return c
}

// startHTTPMock runs mockupstream --http on a loopback port and returns its base URL.
func startHTTPMock(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(built.mock, "--http", "127.0.0.1:0")
	addr := startLogged(t, cmd, "mock", regexp.MustCompile(`listening on (\S+)`), nil)
	return "http://" + addr
}

func startReplica(t *testing.T, name, cfg, dsn string) *replica {
	t.Helper()
	cmd := exec.Command(built.sandbox, "serve", "--transport", "http", "--listen", "127.0.0.1:0", "--config", cfg)
	cmd.Env = append(os.Environ(), "MCP_SANDBOX_PG_DSN="+dsn)
	r := &replica{name: name, cmd: cmd, log: testkit.NewLog(t, name), done: make(chan struct{})}
	r.addr = startLogged(t, cmd, name, regexp.MustCompile(`serving over streamable HTTP.* addr=(\S+)`), r)
	return r
}

// startLogged starts cmd with its stderr in the test log, waits for a line matching re and
// returns its first group. On cleanup the process gets SIGINT, then SIGKILL after 10 s.
func startLogged(t *testing.T, cmd *exec.Cmd, name string, re *regexp.Regexp, r *replica) string {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	log := testkit.NewLog(t, name)
	done := make(chan struct{})
	if r != nil {
		log, done = r.log, r.done
	}
	found := make(chan string, 1)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(log, line)
			if m := re.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
		cmd.Wait()
	}()
	interruptOnCleanup(t, cmd, done)
	select {
	case v := <-found:
		return v
	case <-done:
		t.Fatalf("%s exited before it was ready:\n%s", name, log)
	case <-time.After(60 * time.Second):
		t.Fatalf("%s not ready after 60 s:\n%s", name, log)
	}
	return ""
}

// freeLoopbackPort is a TCP port free on 127.0.0.1 when it returns, for a server that must be
// told its port before it starts.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startHAProxy writes a config for the replicas into a temp dir and runs HAProxy in the
// foreground on free loopback ports. Started as root it drops to nobody itself once it has
// read its config and bound its ports. It returns the balancer's /mcp URL and its statistics'.
func startHAProxy(t *testing.T, bin string, replicas []*replica) (url, stats string) {
	t.Helper()
	port, statsPort := freeLoopbackPort(t), freeLoopbackPort(t)
	var b strings.Builder
	b.WriteString("global\n  maxconn 1024\n")
	if os.Geteuid() == 0 {
		b.WriteString("  user nobody\n  group nogroup\n")
	}
	fmt.Fprintf(&b, `defaults
  mode http
  timeout connect 2s
  timeout client 5m
  timeout server 5m
  timeout http-request 30s
  retries 3
  option redispatch
frontend stats
  bind 127.0.0.1:%d
  stats enable
  stats uri /stats
frontend mcp
  bind 127.0.0.1:%d
  default_backend replicas
backend replicas
  balance roundrobin
  # A session of 2025-11-25 lives in the replica that made it: remember which one answered
  # with an Mcp-Session-Id, and send every request naming it there. A request without one
  # (initialize, any request of 2026-07-28) goes round robin.
  stick-table type string len 128 size 100k expire 30m
  stick on req.hdr(mcp-session-id)
  stick store-response res.hdr(mcp-session-id)
  option httpchk
  http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host 127.0.0.1
  http-check expect status 200
  http-response set-header %s %%[srv_name]
`, statsPort, port, headerReplica)
	for _, r := range replicas {
		fmt.Fprintf(&b, "  server %s %s check inter 500ms fall 2 rise 1\n", r.name, r.addr)
	}
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-c", "-q", "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s\n%s", err, out, b.String())
	}
	cmd := exec.Command(bin, "-db", "-f", path)
	cmd.Stdout = io.Discard
	cmd.Stderr = testkit.NewLog(t, "haproxy")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		waitOrKill(cmd, 10*time.Second)
	})
	url = fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	stats = fmt.Sprintf("http://127.0.0.1:%d/stats;csv", statsPort)
	if !waitFor(30*time.Second, func() bool { return len(upServers(stats)) == len(replicas) }) {
		t.Fatalf("HAProxy does not see the %d replicas up: %v", len(replicas), upServers(stats))
	}
	return url, stats
}

// haproxyStats reads HAProxy's CSV statistics: server name → column → value, for the
// replicas backend's servers.
func haproxyStats(url string) map[string]map[string]string {
	resp, err := http.Get(url)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil
	}
	rows, err := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(body, []byte("# ")))).ReadAll()
	if err != nil || len(rows) == 0 {
		return nil
	}
	out := map[string]map[string]string{}
	for _, row := range rows[1:] {
		if len(row) < 2 || row[0] != "replicas" || row[1] == "BACKEND" {
			continue
		}
		m := map[string]string{}
		for i, col := range rows[0] {
			if i < len(row) {
				m[col] = row[i]
			}
		}
		out[row[1]] = m
	}
	return out
}

func upServers(url string) []string {
	var up []string
	for name, m := range haproxyStats(url) {
		if m["status"] == "UP" {
			up = append(up, name)
		}
	}
	slices.Sort(up)
	return up
}

// requestsPerServer is HAProxy's count of requests sent to each replica (health checks aside).
func requestsPerServer(url string) map[string]int {
	out := map[string]int{}
	for name, m := range haproxyStats(url) {
		var n int
		fmt.Sscan(m["stot"], &n)
		out[name] = n
	}
	return out
}

// served records which replica answered each request a client sent, by JSON-RPC method.
type served struct {
	mu  sync.Mutex
	log []servedBy
}

type servedBy struct{ method, replica string }

func (s *served) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+replicaToken)
	method := r.Method
	if r.Body != nil && r.Method == http.MethodPost {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		method = m.Method
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		s.mu.Lock()
		s.log = append(s.log, servedBy{method, resp.Header.Get(headerReplica)})
		s.mu.Unlock()
	}
	return resp, err
}

// replicasFor lists the distinct replicas that answered requests of method, in order of first answer.
func (s *served) replicasFor(method string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.log {
		if e.method == method && !slices.Contains(out, e.replica) {
			out = append(out, e.replica)
		}
	}
	return out
}

func (s *served) last(method string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.log) - 1; i >= 0; i-- {
		if s.log[i].method == method {
			return s.log[i].replica
		}
	}
	return ""
}

// connectVia connects a go-sdk client through the balancer at revision ("" is the SDK's
// newest, 2026-07-28).
func (c *cluster) connectVia(t *testing.T, revision string) (*mcp.ClientSession, *served) {
	t.Helper()
	s := &served{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "replicas", Version: "0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: c.url, HTTPClient: &http.Client{Transport: s}, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: revision})
	if err != nil {
		t.Fatalf("connect through the balancer (revision %q): %v", revision, err)
	}
	t.Cleanup(func() { cs.Close() })
	want := revision
	if want == "" {
		want = "2026-07-28"
	}
	if got := cs.InitializeResult().ProtocolVersion; got != want {
		t.Fatalf("negotiated revision %q, want %q", got, want)
	}
	return cs, s
}

// mockCounts asks the shared mock how many times each tool was really called.
func (c *cluster) mockCounts(t *testing.T) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "counter", Version: "0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: c.mock, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect to the mock: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "counter"})
	if err != nil {
		t.Fatalf("mock counter: %v", err)
	}
	var out struct {
		Counts map[string]int `json:"counts"`
	}
	if b, err := structured(res, &out); err != nil {
		t.Fatalf("mock counter %s: %v", b, err)
	}
	return out.Counts
}

func (c *cluster) db(t *testing.T) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// runVia runs code with run_code in the Run named runID (none when empty) and decodes the
// structured result; a failed program fails the test.
func runVia(t *testing.T, cs *mcp.ClientSession, runID, code string, v any) fullResult {
	t.Helper()
	return runIn(t, cs, runID, code, v)
}

const racingLookups = `
import asyncio
async def one(i):
    try:
        await support__lookup(sku=f"S{i}")
        return "ok"
    except ToolError as e:
        return e.kind
return await asyncio.gather(*(one(i) for i in range(16)))
`

// TestReplicasShareRunsAndHandles: a named Run's executions land on different replicas and
// keep one exact budget (4 executions × 16 racing calls against max_calls 10 → exactly 10
// deliveries at the shared mock) and one context economy (the Run's, which the ledger keeps
// on its row, sums every execution's, wherever each ended); a handle made on one replica is
// read through another.
func TestReplicasShareRunsAndHandles(t *testing.T) {
	c := startCluster(t)
	cs, s := c.connectVia(t, "")
	before := c.mockCounts(t)["lookup"]

	var wg sync.WaitGroup
	results := make([][]string, 4)
	fulls := make([]fullResult, len(results)+1)
	for i := range results {
		wg.Go(func() { fulls[i] = runVia(t, cs, "budget-across-replicas", racingLookups, &results[i]) })
	}
	wg.Wait()
	// A fifth execution of the Run, once the four have ended: its context.run is the five's sum.
	fulls[len(results)] = runVia(t, cs, "budget-across-replicas", `return "x" * 100`, nil)
	var sum economy
	for _, f := range fulls {
		sum.BindingBytes += f.Context.Execution.BindingBytes
		sum.ReturnedBytes += f.Context.Execution.ReturnedBytes
		sum.KeptOutBytes += f.Context.Execution.KeptOutBytes
	}
	if got := fulls[len(results)].Context.Run; got != sum || sum.ReturnedBytes == 0 {
		t.Errorf("the Run's context economy after five executions across replicas = %+v, want their sum %+v", got, sum)
	}
	var ok, refused int
	for _, r := range results {
		for _, k := range r {
			switch k {
			case "ok":
				ok++
			case "budget_exceeded":
				refused++
			default:
				t.Errorf("a call ended %q", k)
			}
		}
	}
	if ok != 10 || refused != 54 {
		t.Errorf("64 racing calls in one Run against max_calls 10: %d delivered, %d refused (per execution %v)", ok, refused, results)
	}
	if got := c.mockCounts(t)["lookup"] - before; got != 10 {
		t.Errorf("the mock received %d lookups, want exactly 10", got)
	}
	on := s.replicasFor("tools/call")
	t.Logf("the Run's executions were answered by %v", on)
	if len(on) < 2 {
		t.Errorf("the Run's executions all landed on %v; the test proves nothing across replicas", on)
	}

	// A handle made on one replica, read through another.
	var full fullResult
	runInto(t, cs, "", `for i in range(3000): print("line", i)`, nil, &full)
	made := s.last("tools/call")
	var handle string
	for _, a := range full.Attachments {
		if a.Name == "stdout" && a.Location == "blob" {
			handle = a.Handle
		}
	}
	if handle == "" {
		t.Fatalf("no stdout handle kept in the shared blob store: %+v", full.Attachments)
	}
	for range len(c.replicas) {
		res := call(t, cs, "read_tool_output", map[string]any{"handle": handle, "offset": 2000, "limit": 2})
		if s.last("tools/call") == made {
			continue // the balancer sent it back to where it was made; the next goes elsewhere
		}
		if res.IsError || !strings.Contains(testkit.Text(res), "line 2000") || !strings.Contains(testkit.Text(res), "line 2001") {
			t.Errorf("handle made on %s, read on %s: %s", made, s.last("tools/call"), testkit.Text(res))
		}
		t.Logf("handle made on %s read on %s", made, s.last("tools/call"))
		return
	}
	t.Errorf("every read of the handle landed on %s, where it was made", made)
}

// TestReplicaKilledMidCall: a replica SIGKILLed while its program's call is at the upstream
// leaves the call started; a survivor records it unknown within about the lease, it stays
// counted in the Run's budget, and the mock saw exactly one delivery (never replayed).
func TestReplicaKilledMidCall(t *testing.T) {
	c := startCluster(t)
	cs, s := c.connectVia(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	callErr := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_code", Meta: mcp.Meta{"mcp-sandbox/run": "killed"},
			Arguments: map[string]any{"code": `await support__slow(seconds=600)`}})
		callErr <- err
	}()
	if !waitFor(60*time.Second, func() bool { return c.mockCounts(t)["slow"] == 1 }) {
		t.Fatalf("the slow call never reached the mock: %v", c.mockCounts(t))
	}
	db := c.db(t)
	var callID string
	var pid int
	err := db.QueryRow(ctx, `SELECT c.id, l.pid FROM ledger_calls c JOIN ledger_leases l ON l.owner = c.owner
		WHERE c.run_id = 'named:killed' AND c.status = 'started'`).Scan(&callID, &pid)
	if err != nil {
		t.Fatalf("the call in flight and its replica's lease: %v", err)
	}
	var victim *replica
	for _, r := range c.replicas {
		if r.cmd.Process.Pid == pid {
			victim = r
		}
	}
	if victim == nil {
		t.Fatalf("the lease holding call %s names pid %d, none of the replicas", callID, pid)
	}
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-victim.done
	t.Logf("killed %s (pid %d) holding call %s", victim.name, pid, callID)
	select {
	case err := <-callErr:
		if err == nil {
			t.Error("the call whose replica was killed returned a result")
		}
	case <-time.After(30 * time.Second):
		t.Error("the client was not told its call's replica went away")
	}

	var status string
	var survivor *replica
	recorded := waitFor(4*leaseSeconds*time.Second, func() bool {
		if db.QueryRow(ctx, `SELECT status FROM ledger_calls WHERE id = $1`, callID).Scan(&status) != nil || status != "unknown" {
			return false
		}
		for _, r := range c.replicas {
			if r != victim && strings.Contains(r.log.String(), "call="+callID) {
				survivor = r
			}
		}
		return survivor != nil
	})
	took := time.Since(killed)
	if !recorded {
		t.Fatalf("call %s is %q %v after its replica was killed, no survivor logged it", callID, status, took)
	}
	t.Logf("%s recorded call %s unknown %v after the kill (lease %d s)", survivor.name, callID, took.Round(time.Millisecond), leaseSeconds)
	if limit := leaseSeconds*time.Second*5/4 + 5*time.Second; took > limit {
		t.Errorf("recorded unknown after %v, want within a lease and a quarter (%v, with slack)", took, limit)
	}

	// Counted: the Run's next execution, on a survivor, sees the unknown call spent.
	r := runVia(t, cs, "killed", `await support__lookup(sku="after")`, nil)
	if r.Budget.Run.Calls != 2 || r.Budget.Execution.Calls != 1 {
		t.Errorf("after the kill the Run has spent %d calls (execution %d), want 2 (the unknown one counted)", r.Budget.Run.Calls, r.Budget.Execution.Calls)
	}
	if on := s.last("tools/call"); on == victim.name || on == "" {
		t.Errorf("the Run's next execution was answered by %q", on)
	}
	if n := c.mockCounts(t)["slow"]; n != 1 {
		t.Errorf("the mock received the slow call %d times, want 1 (never replayed)", n)
	}
}

// TestReplicasBothRevisions: through the balancer, clients of 2026-07-28 (go-sdk and mcp-go)
// run 6*7 with their requests spread over the replicas, needing no affinity; clients of
// 2025-11-25 get a session the balancer keeps on one replica.
func TestReplicasBothRevisions(t *testing.T) {
	c := startCluster(t)
	mcpgo := ecoBuildMCPGoClient(t)

	t.Run("go-sdk/2026-07-28", func(t *testing.T) {
		cs, s := c.connectVia(t, "")
		if cs.ID() != "" {
			t.Errorf("session id %q in the sessionless revision", cs.ID())
		}
		for range 3 {
			var v int
			runVia(t, cs, "", "6*7", &v)
			if v != 42 {
				t.Errorf("6*7 = %d", v)
			}
		}
		if on := s.replicasFor("tools/call"); len(on) < 2 {
			t.Errorf("three calls answered by %v: the balancer did not spread them", on)
		}
	})
	t.Run("go-sdk/2025-11-25", func(t *testing.T) {
		cs, s := c.connectVia(t, "2025-11-25")
		if cs.ID() == "" {
			t.Fatal("no session in 2025-11-25")
		}
		for range 3 {
			var v int
			runVia(t, cs, "", "6*7", &v)
			if v != 42 {
				t.Errorf("6*7 = %d", v)
			}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, e := range s.log[1:] {
			if e.replica != s.log[0].replica {
				t.Errorf("the session made on %s had %s answered by %s", s.log[0].replica, e.method, e.replica)
			}
		}
	})
	for _, revision := range []string{"2026-07-28", "2025-11-25"} {
		t.Run("mcp-go/"+revision, func(t *testing.T) {
			before := requestsPerServer(c.stats)
			args := []string{"-url", c.url, "-token", replicaToken}
			if revision != "2026-07-28" {
				args = append(args, "-protocol", revision) // else mcp-go's own choice
			}
			out, err := ecoRun(t, time.Minute, ".", os.Environ(), mcpgo, args...)
			if err != nil {
				t.Fatalf("mcpgoclient: %v\n%.500s", err, out)
			}
			var r ecoClientReport
			ecoDecode(t, out, &r)
			ecoCheck42(t, r)
			if r.Protocol != revision {
				t.Errorf("mcp-go settled on %q, want %q", r.Protocol, revision)
			}
			var spread int
			for name, n := range requestsPerServer(c.stats) {
				if n > before[name] {
					spread++
				}
			}
			t.Logf("mcp-go's requests reached %d replicas", spread)
			if revision == "2026-07-28" && spread < 2 {
				t.Errorf("mcp-go's sessionless requests all reached one replica")
			}
			if revision == "2025-11-25" && spread != 1 {
				t.Errorf("mcp-go's session reached %d replicas, want the one that made it", spread)
			}
		})
	}
}

func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return cond()
}
