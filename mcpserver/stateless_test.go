package mcpserver

import (
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/budget/sqlite"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// roundRobin sends each request to the next of servers, as a balancer without affinity does.
type roundRobin struct {
	servers []*url.URL
	next    atomic.Int64
	mu      sync.Mutex
	seen    map[string]int // requests per server host
}

func (rr *roundRobin) RoundTrip(r *http.Request) (*http.Response, error) {
	u := rr.servers[int(rr.next.Add(1)-1)%len(rr.servers)]
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host, r.Host = u.Scheme, u.Host, u.Host
	rr.mu.Lock()
	rr.seen[u.Host]++
	rr.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

// replicas serves agent a from n separate HTTPHandlers (each its own sessions) sharing one
// ledger, behind a round-robin transport.
func replicas(t *testing.T, n int, a Agent, led budget.Ledger) (*roundRobin, string) {
	t.Helper()
	rr := &roundRobin{seen: map[string]int{}}
	for range n {
		srv := httptest.NewServer(HTTPHandler(&HTTPOptions{
			Agents:    []Agent{a},
			Tokenless: func() string { return a.Tenant },
			Loopback:  true,
			Server:    &Options{Ledger: led, Logger: discard(), Drain: drainAtCleanup(t)},
			Logger:    discard(),
		}))
		t.Cleanup(srv.Close)
		u, _ := url.Parse(srv.URL)
		rr.servers = append(rr.servers, u)
	}
	return rr, rr.servers[0].String() + "/mcp"
}

func connectHTTP(t *testing.T, endpoint string, rt http.RoundTripper, version string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(10*time.Second))
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, opts).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: rt}, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// TestStatelessRevisionNeedsNoAffinity: a go-sdk client of 2026-07-28 discovers and calls
// run_code through three servers taking turns, with no session; every request is its own Run
// unless _meta names one. A 2025-11-25 client on the same endpoint gets a session (and so needs
// affinity: through the same three it fails).
func TestStatelessRevisionNeedsNoAffinity(t *testing.T) {
	dir := t.TempDir()
	led, err := sqlite.Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() }) // after the servers and sessions, which record into it
	a := Agent{Tenant: "t", Name: "default", CodeExecution: &CodeExec{Sandbox: fakeSandbox{run: ok("42")}, Terms: testTerms}}
	rr, endpoint := replicas(t, 3, a, led)

	cs, err := connectHTTP(t, endpoint, rr, "", nil)
	if err != nil {
		t.Fatalf("connect (default revision): %v", err)
	}
	if v := cs.InitializeResult().ProtocolVersion; v != revisionStateless {
		t.Fatalf("negotiated %q, want %s", v, revisionStateless)
	}
	if cs.ID() != "" {
		t.Errorf("a session id %q in the sessionless revision", cs.ID())
	}
	for i := range 6 {
		p := &mcp.CallToolParams{Name: ToolRunCode, Arguments: map[string]any{"code": "6*7"}}
		if i >= 3 {
			p.Meta = mcp.Meta{MetaRun: "conversation-1"}
		}
		res, err := cs.CallTool(context.Background(), p)
		if err != nil {
			t.Fatalf("run_code %d: %v", i, err)
		}
		if !strings.Contains(testkit.Text(res), "value: 42") {
			t.Errorf("run_code %d: %s", i, testkit.Text(res))
		}
	}
	rr.mu.Lock()
	if len(rr.seen) != 3 {
		t.Errorf("requests reached %d servers, want 3: %v", len(rr.seen), rr.seen)
	}
	rr.mu.Unlock()

	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, sqlite.LedgerFile)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT run_id, count(*) FROM executions GROUP BY run_id`)
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		runs[id] = n
	}
	rows.Close()
	if runs["named:conversation-1"] != 3 {
		t.Errorf("executions per Run %v: want 3 in named:conversation-1", runs)
	}
	var single int
	for id, n := range runs {
		if strings.HasPrefix(id, "request:") && n == 1 {
			single++
		}
	}
	if single != 3 || len(runs) != 4 {
		t.Errorf("executions per Run %v: want each unnamed request its own request: Run", runs)
	}

	legacy, err := connectHTTP(t, endpoint, &roundRobin{servers: rr.servers[:1], seen: map[string]int{}}, "2025-11-25", nil)
	if err != nil {
		t.Fatalf("connect (2025-11-25): %v", err)
	}
	if v := legacy.InitializeResult().ProtocolVersion; v != "2025-11-25" || legacy.ID() == "" {
		t.Errorf("2025-11-25 client: revision %q, session %q; want a session", v, legacy.ID())
	}
	if res := call(t, legacy, ToolRunCode, map[string]any{"code": "6*7"}); res.IsError {
		t.Errorf("run_code over a session: %s", testkit.Text(res))
	}
	if cs, err := connectHTTP(t, endpoint, rr, "2025-11-25", nil); err == nil {
		if _, err := cs.ListTools(context.Background(), nil); err == nil {
			t.Errorf("a 2025-11-25 session survived three servers taking turns; the test proves nothing")
		}
	}
}

// TestStatelessProgressAndCancel: in the sessionless revision progress still reaches the
// client within its request, and a client that gives up the request cancels the program.
func TestStatelessProgressAndCancel(t *testing.T) {
	cancelled := make(chan struct{})
	slow := func(ctx context.Context, ex engine.Execution) *engine.Outcome {
		for i := 1; ; i++ {
			select {
			case <-ctx.Done():
				close(cancelled)
				r := engine.Refuse(ex.Terms, failure.Cancelled, "cancelled")
				r.Cancelled = true
				return r
			case <-time.After(50 * time.Millisecond):
				if ex.Progress != nil {
					ex.Progress(float64(i), nil)
				}
			}
		}
	}
	a := Agent{Tenant: "t", Name: "default", CodeExecution: &CodeExec{Sandbox: fakeSandbox{slow}, Terms: testTerms}}
	rr, endpoint := replicas(t, 1, a, nil)
	var got atomic.Int32
	cs, err := connectHTTP(t, endpoint, rr, "", &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { got.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolRunCode, Arguments: map[string]any{"code": "x"}, Meta: mcp.Meta{"progressToken": "p"}})
		done <- err
	}()
	if !waitUntil(gate.Scaled(10*time.Second), func() bool { return got.Load() >= 2 }) {
		t.Fatalf("%d progress notifications in the sessionless revision, want several", got.Load())
	}
	cancel()
	select {
	case <-cancelled:
	case <-time.After(gate.Scaled(10 * time.Second)):
		t.Fatal("the program was not cancelled when the client gave up its request")
	}
	if err := <-done; err == nil {
		t.Error("a cancelled call returned no error")
	}
}

func waitUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cond()
}

// TestSessionlessRouting: the header alone picks the handler.
func TestSessionlessRouting(t *testing.T) {
	for v, want := range map[string]bool{"": false, "2025-11-25": false, "2025-06-18": false, "2026-07-28": true, " 2026-07-28 ": true, "2027-01-01": true} {
		r := httptest.NewRequest("POST", "/mcp", nil)
		if v != "" {
			r.Header.Set("MCP-Protocol-Version", v)
		}
		if got := sessionless(r); got != want {
			t.Errorf("MCP-Protocol-Version %q: sessionless %v, want %v", v, got, want)
		}
	}
}
