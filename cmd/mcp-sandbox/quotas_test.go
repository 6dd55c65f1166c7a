package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/pgdb/pgtest"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// quotaConfig: the server's quotas (the first %s), tenants a and b (two programs at once
// each, a second of waiting), c (one at once, waits a minute), s and u (two sessions each).
const quotaConfig = `
data_dir: "-"
profiles:
  default: {backend: local, isolation: process, allow_same_uid: true, hard_limits: {wall_seconds: 60}}
quotas: %s
tenants:
  a:
    tokens: ["%s"]
    policy: {quotas: {max_concurrent_executions: 2, queue_seconds: 1}}
    agents: {default: {code_execution: {}}}
  b:
    tokens: ["%s"]
    policy: {quotas: {max_concurrent_executions: 2, queue_seconds: 1}}
    agents: {default: {code_execution: {}}}
  c:
    tokens: ["%s"]
    policy: {quotas: {max_concurrent_executions: 1, queue_seconds: 60}}
    agents: {default: {code_execution: {}}}
  s:
    tokens: ["%s"]
    policy: {quotas: {max_sessions: 2}}
    agents: {default: {code_execution: {}}}
  u:
    tokens: ["%s"]
    policy: {quotas: {max_sessions: 2}}
    agents: {default: {code_execution: {}}}
`

// startQuotaServer serves quotaConfig with the server's quotas, and returns its base URL and
// its metrics' URL.
func startQuotaServer(t *testing.T, server string) (base, metricsURL string) {
	t.Helper()
	hashes := []any{server}
	for _, tenant := range []string{"a", "b", "c", "s", "u"} {
		hashes = append(hashes, configs.HashToken("token-"+tenant))
	}
	metricsAt := make(chan string, 1)
	re := regexp.MustCompile(`msg="serving metrics" addr=(\S+)`)
	base, _ = startHTTPWatching(t, testkit.WriteConfig(t, fmt.Sprintf(quotaConfig, hashes...)), nil, func(_ *exec.Cmd, line string) {
		if m := re.FindStringSubmatch(line); m != nil {
			metricsAt <- "http://" + m[1] + "/metrics"
		}
	}, "--metrics-listen", "localhost:0", "--metrics-tenant-labels")
	select {
	case metricsURL = <-metricsAt:
	case <-time.After(gate.Scaled(10 * time.Second)):
		t.Fatal("the server did not say where its metrics are")
	}
	return base, metricsURL
}

// scrapeMetrics returns the exposition at url.
func scrapeMetrics(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return string(b)
}

// quotaResult is what the quota tests read of a run_code answer.
type quotaResult struct {
	IsError bool
	Value   json.RawMessage
	Failure *struct {
		Kind     string `json:"kind"`
		Message  string `json:"message"`
		Executed bool   `json:"executed"`
	}
}

// callRunCode runs code and returns its answer; a protocol error is an error (never a
// t.Fatal: it runs on goroutines).
func callRunCode(ctx context.Context, cs *mcp.ClientSession, code string, progress any) (quotaResult, error) {
	params := &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": code}}
	if progress != nil {
		params.Meta = mcp.Meta{"progressToken": progress}
	}
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		return quotaResult{}, err
	}
	b, _ := json.Marshal(res.Meta["mcp-sandbox/report"])
	var r struct {
		Value   json.RawMessage `json:"value"`
		Failure *struct {
			Kind     string `json:"kind"`
			Message  string `json:"message"`
			Executed bool   `json:"executed"`
		} `json:"failure"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return quotaResult{}, fmt.Errorf("structuredContent %s: %v", b, err)
	}
	return quotaResult{IsError: res.IsError, Value: r.Value, Failure: r.Failure}, nil
}

// runAll runs each code of codes at once in its own session of tenant's (2026-07-28, the
// go-sdk client's revision: each call a request of its own) and returns the answers in order.
func runAll(t *testing.T, base, tenant string, codes ...string) []quotaResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(120*time.Second))
	defer cancel()
	sessions := make([]*mcp.ClientSession, len(codes))
	for i := range codes {
		cs, err := connectHTTP(t, base+"/mcp", bearer{"token-" + tenant}, "", nil)
		if err != nil {
			t.Fatalf("tenant %s: connect: %v", tenant, err)
		}
		sessions[i] = cs
	}
	out := make([]quotaResult, len(codes))
	var wg sync.WaitGroup
	for i, code := range codes {
		wg.Go(func() {
			r, err := callRunCode(ctx, sessions[i], code, nil)
			if err != nil {
				t.Errorf("tenant %s: run_code: %v (a refusal must be a result, not a protocol error)", tenant, err)
			}
			out[i] = r
		})
	}
	wg.Wait()
	return out
}

// tally counts answers by failure kind ("ok" for none), checking that every refusal is a
// structured error result that says nothing ran.
func tally(t *testing.T, rs []quotaResult, wantIn string) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, r := range rs {
		if r.Failure == nil {
			n["ok"]++
			continue
		}
		n[r.Failure.Kind]++
		if r.Failure.Kind == "capacity_exceeded" && (!r.IsError || r.Failure.Executed || !strings.Contains(r.Failure.Message, wantIn)) {
			t.Errorf("refusal %+v (isError %v): want an error result, executed false, naming %q", *r.Failure, r.IsError, wantIn)
		}
	}
	return n
}

// TestServeQuotaExecutions drives the built binary over HTTP: five programs of tenant a at once
// run two at a time and refuse the rest with a structured capacity_exceeded result once a
// second of waiting has passed; meanwhile tenant b still runs a program (a's queue is a's own),
// and b's second waits for the server's last slot and is refused naming the server's limit.
// Then tenant c's three programs, one at a time with a minute to wait, all run, one after
// another.
func TestServeQuotaExecutions(t *testing.T) {
	base, metricsURL := startQuotaServer(t, "{max_concurrent_executions: 3}")
	var wg sync.WaitGroup
	var aRes []quotaResult
	wg.Go(func() {
		aRes = runAll(t, base, "a", repeat("import time; time.sleep(8); 'a'", 5)...)
	})
	// b starts once a's refusals are under way: a then holds two of the server's three slots.
	time.Sleep(2500 * time.Millisecond)
	bRes := runAll(t, base, "b", "import time; time.sleep(2); 'b1'", "import time; time.sleep(2); 'b2'")
	wg.Wait()
	if got := tally(t, aRes, `tenant "a" has its limit of 2 programs running at once`); got["ok"] != 2 || got["capacity_exceeded"] != 3 {
		t.Errorf("tenant a's five programs: %v, want 2 ok and 3 capacity_exceeded", got)
	}
	if got := tally(t, bRes, "the server has its limit of 3 programs running at once"); got["ok"] != 1 || got["capacity_exceeded"] != 1 {
		t.Errorf("tenant b's two programs: %v, want 1 ok and 1 capacity_exceeded (the server's limit)", got)
	}
	// The refusals are counted as refusals, and nothing runs or waits any more.
	body := scrapeMetrics(t, metricsURL)
	for _, want := range []string{
		`mcp_sandbox_executions_total{agent="default",kind="capacity_exceeded",level="none",outcome="refused",profile="default",tenant="a"} 3`,
		`mcp_sandbox_executions_total{agent="default",kind="capacity_exceeded",level="none",outcome="refused",profile="default",tenant="b"} 1`,
		`mcp_sandbox_executions_running{tenant="a"} 0`,
		`mcp_sandbox_executions_queued{tenant="b"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	code := "import time; s = time.time(); time.sleep(1); [s, time.time()]"
	var spans [][2]float64
	for i, r := range runAll(t, base, "c", code, code, code) {
		var span [2]float64
		if r.Failure != nil || json.Unmarshal(r.Value, &span) != nil {
			t.Fatalf("tenant c's program %d did not wait for its turn: %+v %s", i, r.Failure, r.Value)
		}
		spans = append(spans, span)
	}
	for i := range spans {
		for j := range spans {
			if i != j && spans[i][0] < spans[j][1] && spans[j][0] < spans[i][1] {
				t.Errorf("tenant c's programs %d %v and %d %v overlapped, with one slot", i, spans[i], j, spans[j])
			}
		}
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// rawInitialize POSTs a 2025-11-25 initialize for tenant and returns the status and body.
func rawInitialize(t *testing.T, base, tenant string) (int, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"0"}}}`
	req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer token-"+tenant)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		// End the session this made, so it does not count on.
		del, _ := http.NewRequest("DELETE", base+"/mcp", nil)
		del.Header.Set("Mcp-Session-Id", id)
		del.Header.Set("Authorization", "Bearer token-"+tenant)
		if r, err := http.DefaultClient.Do(del); err == nil {
			r.Body.Close()
		}
	}
	return resp.StatusCode, string(b)
}

// TestServeQuotaSessions drives the built binary over HTTP: tenant s holds at most two
// sessions, counting 2025-11-25 sessions and 2026-07-28 requests in flight alike; a third is
// refused with 429 naming max_sessions, and room comes back when a session or the request
// ends. The server holds at most three, every tenant together: past that, 503.
func TestServeQuotaSessions(t *testing.T) {
	base, _ := startQuotaServer(t, "{max_sessions: 3}")
	endpoint := base + "/mcp"
	legacy1, err := connectHTTP(t, endpoint, bearer{"token-s"}, "2025-11-25", nil)
	if err != nil {
		t.Fatalf("first session: %v", err)
	}
	running := make(chan struct{})
	var once sync.Once
	modern, err := connectHTTP(t, endpoint, bearer{"token-s"}, "", &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { once.Do(func() { close(running) }) },
	})
	if err != nil {
		t.Fatalf("a 2026-07-28 client beside one session: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(60*time.Second))
	defer cancel()
	// The program in flight runs until the test ends its request (a program that ended on a
	// timer of its own once did so before a loaded machine had made the checks below).
	call, endCall := context.WithCancel(ctx)
	defer endCall()
	inFlight := make(chan error, 1)
	go func() {
		_, err := callRunCode(call, modern, "import time; time.sleep(600)", "tok")
		inFlight <- err
	}()
	select {
	case <-running:
	case err := <-inFlight:
		t.Fatalf("the program meant to be in flight ended before it reported progress: %v", err)
	case <-ctx.Done():
		t.Fatal("the in-flight program never reported progress")
	}
	// One session and one request in flight: tenant s is at its limit of two.
	if status, body := rawInitialize(t, base, "s"); status != http.StatusTooManyRequests || !strings.Contains(body, `tenant "s" holds its limit of 2 sessions (max_sessions`) {
		t.Errorf("a third session while one request is in flight: %d %q, want 429 naming max_sessions", status, body)
	}
	if _, err := connectHTTP(t, endpoint, bearer{"token-s"}, "", nil); err == nil {
		t.Error("a 2026-07-28 request past the limit was served")
	}
	endCall()
	if err := <-inFlight; err == nil {
		t.Fatal("the in-flight program's request, cancelled, was answered")
	}
	// Ended: its place is free again, once the server has seen the request end.
	var legacy2 *mcp.ClientSession
	for deadline := time.Now().Add(gate.Scaled(20 * time.Second)); ; time.Sleep(50 * time.Millisecond) {
		if legacy2, err = connectHTTP(t, endpoint, bearer{"token-s"}, "2025-11-25", nil); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("a second session once the request had ended: %v", err)
	}
	if status, _ := rawInitialize(t, base, "s"); status != http.StatusTooManyRequests {
		t.Errorf("a third session: status %d, want 429", status)
	}
	// The server's limit is three, every tenant together: u gets one, and then 503.
	if _, err := connectHTTP(t, endpoint, bearer{"token-u"}, "2025-11-25", nil); err != nil {
		t.Fatalf("tenant u's first session: %v", err)
	}
	if status, body := rawInitialize(t, base, "u"); status != http.StatusServiceUnavailable || !strings.Contains(body, "the server holds its limit of 3 sessions") {
		t.Errorf("a fourth session on the server: %d %q, want 503 naming the server's limit", status, body)
	}
	// A session that ends (the client closes it: DELETE) gives its place back.
	legacy1.Close()
	if _, err := connectHTTP(t, endpoint, bearer{"token-s"}, "2025-11-25", nil); err != nil {
		t.Errorf("a session after one was closed: %v", err)
	}
	legacy2.Close()
}

// connectHTTP connects a go-sdk client at revision ("" is the SDK's newest, 2026-07-28), with
// no retries, so a refusal is seen as it is; the session is closed when t ends.
func connectHTTP(t *testing.T, endpoint string, rt http.RoundTripper, revision string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(20*time.Second))
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "quota-test", Version: "0"}, opts).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: rt}, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: revision})
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// storedConfig: tenant q may keep 100 KiB of outputs; agent strict's profile requires them kept.
// The first %s is the blob store's lines.
const storedConfig = `
data_dir: %q
%s
profiles:
  default: {backend: local, isolation: process, allow_same_uid: true}
  strict: {backend: local, isolation: process, allow_same_uid: true, output: {preserve: required}}
tenants:
  q:
    policy: {quotas: {max_stored_bytes: 100KiB}}
    agents:
      default: {code_execution: {}}
      strict: {code_execution: {profile: strict}}
`

// TestServeQuotaStoredBytes drives the built binary on each blob store: tenant q's first 60 KB
// stdout is kept under a handle; the next would take it past its 100 KiB, so it stays a
// preview with the reason (naming max_stored_bytes), and under preserve: required it is an
// output_not_preserved failure saying the same.
func TestServeQuotaStoredBytes(t *testing.T) {
	for _, store := range []string{"files", "postgres"} {
		t.Run(store, func(t *testing.T) {
			blobs := ""
			if store == "postgres" {
				t.Setenv("MCPS_TEST_BLOB_DSN", pgtest.Schema(t))
				blobs = "blobs: {postgres: {dsn: {env: MCPS_TEST_BLOB_DSN}}}"
			}
			cfg := testkit.WriteConfig(t, fmt.Sprintf(storedConfig, t.TempDir(), blobs))
			ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(90*time.Second))
			defer cancel()
			type attachment struct{ Name, Handle, Location, Reason string }
			run := func(cs *mcp.ClientSession) (bool, *struct{ Kind, Message string }, attachment) {
				t.Helper()
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": "print('x' * 60000)"}})
				if err != nil {
					t.Fatalf("run_code: %v", err)
				}
				var out struct {
					Failure     *struct{ Kind, Message string } `json:"failure"`
					Attachments []attachment                    `json:"attachments"`
				}
				b, _ := json.Marshal(res.Meta["mcp-sandbox/report"])
				if err := json.Unmarshal(b, &out); err != nil {
					t.Fatalf("structuredContent %s: %v", b, err)
				}
				for _, a := range out.Attachments {
					if a.Name == "stdout" {
						return res.IsError, out.Failure, a
					}
				}
				t.Fatalf("no stdout attachment: %s", b)
				return false, nil, attachment{}
			}
			cs := connectStdio(t, []string{"--config", cfg, "--agent", "default"}, nil)
			if isErr, f, a := run(cs); isErr || a.Location != "blob" || a.Handle == "" {
				t.Fatalf("the first output, within the quota: error %v %+v, attachment %+v; want it kept", isErr, f, a)
			}
			isErr, f, a := run(cs)
			if isErr || a.Location != "preview_only" || a.Handle != "" || !strings.Contains(a.Reason, "max_stored_bytes") {
				t.Errorf("the second output, past the quota: error %v %+v, attachment %+v; want a preview with the reason", isErr, f, a)
			}
			strict := connectStdio(t, []string{"--config", cfg, "--agent", "strict"}, nil)
			isErr, f, a = run(strict)
			if !isErr || f == nil || f.Kind != "output_not_preserved" || !strings.Contains(f.Message, "max_stored_bytes") || a.Location != "preview_only" {
				t.Errorf("past the quota under preserve: required: error %v %+v, attachment %+v; want output_not_preserved naming max_stored_bytes", isErr, f, a)
			}
		})
	}
}
