package conformance

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// processProfile opens the profiles block of a test's config: profile "default" runs programs
// with the process backend as the server's own uid (the tests run as one user; isolation is the
// backends' contract suites' concern). The profile's further keys follow it, four spaces in.
const processProfile = `profiles:
  default:
    backend: local
    isolation: process
    allow_same_uid: true
`

// built holds the binaries the kit builds once: mcp-sandbox and the mock upstream.
var built struct {
	sandbox, mock string
}

func TestMain(m *testing.M) {
	os.Exit(testkit.Run(m, func() (err error) {
		if built.sandbox, err = testkit.BuildBinary(); err != nil {
			return err
		}
		built.mock, err = testkit.BuildMockUpstream()
		return err
	}))
}

// transcript counts the JSON-RPC requests the client sends and the results it receives, by
// method: what a model's transcript would hold.
type transcript struct {
	mu      sync.Mutex
	sent    map[string]int
	results map[string]int
}

func (tr *transcript) count(m map[string]int, method string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	m[method]++
}

func (tr *transcript) get(m map[string]int, method string) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return m[method]
}

// serve starts `mcp-sandbox serve --config cfg` over stdio and connects a go-sdk client.
func serve(t *testing.T, cfg string, opts *mcp.ClientOptions) (*mcp.ClientSession, *transcript) {
	t.Helper()
	cs, tr, _, _ := serveWithProc(t, cfg, opts)
	return cs, tr
}

// serveWithProc is serve that also returns the server's process and its config file's path.
func serveWithProc(t *testing.T, cfg string, opts *mcp.ClientOptions) (*mcp.ClientSession, *transcript, *exec.Cmd, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// Tests read the server's log: info lines too, which serve over stdio leaves out by default.
	cmd := exec.Command(built.sandbox, "serve", "--config", path, "--log-level", "info")
	cmd.Stderr = testkit.NewLog(t, "server")
	client := mcp.NewClient(&mcp.Implementation{Name: "conformance", Version: "0"}, opts)
	tr := &transcript{sent: map[string]int{}, results: map[string]int{}}
	client.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			tr.count(tr.sent, method)
			res, err := next(ctx, method, req)
			if err == nil {
				tr.count(tr.results, method)
			}
			return res, err
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, tr, cmd, path
}

// result is the part of run_code's structured result the tests read.
type result struct {
	Value   json.RawMessage `json:"value"`
	Stdout  string          `json:"stdout"`
	Stderr  string          `json:"stderr"`
	Failure *struct {
		Kind      string `json:"kind"`
		Message   string `json:"message"`
		Traceback string `json:"traceback"`
	} `json:"failure"`
	Unavailable []string `json:"unavailable_bindings"`
}

// run runs code with run_code and decodes its value into v (when v is not nil); a failed
// program fails the test.
func run(t *testing.T, cs *mcp.ClientSession, code string, v any) result {
	t.Helper()
	var r result
	runInto(t, cs, "", code, v, &r)
	return r
}

// runInto runs code with run_code, in the Run named runID when it is not empty, decodes the
// structured result into full and the value into v (when v is not nil); a failed program
// fails the test.
func runInto(t *testing.T, cs *mcp.ClientSession, runID, code string, v, full any) {
	t.Helper()
	b := runCodeIn(t, cs, runID, code)
	var r result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("structuredContent %s: %v", b, err)
	}
	if r.Failure != nil {
		t.Fatalf("program failed (%s): %s\n%s\nstderr: %s", r.Failure.Kind, r.Failure.Message, r.Failure.Traceback, r.Stderr)
	}
	if err := json.Unmarshal(b, full); err != nil {
		t.Fatalf("structuredContent %s: %v", b, err)
	}
	if v != nil {
		if err := json.Unmarshal(r.Value, v); err != nil {
			t.Fatalf("value %s: %v", r.Value, err)
		}
	}
}

// runCodeIn runs code with run_code, in the Run named runID when it is not empty, and
// returns the whole report as JSON, failed or not.
func runCodeIn(t *testing.T, cs *mcp.ClientSession, runID, code string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	p := &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": code}}
	if runID != "" {
		p.Meta = mcp.Meta{"mcp-sandbox/run": runID}
	}
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		t.Fatalf("run_code: %v", err)
	}
	return reportOf(res)
}

// reportOf is the whole report of a run_code result (its _meta "mcp-sandbox/report") as JSON.
func reportOf(res *mcp.CallToolResult) []byte {
	b, _ := json.Marshal(res.Meta["mcp-sandbox/report"])
	return b
}

// structured decodes res's structured content into v, and returns it as JSON for a message.
func structured(res *mcp.CallToolResult, v any) ([]byte, error) {
	b, _ := json.Marshal(res.StructuredContent)
	return b, json.Unmarshal(b, v)
}

// call makes a direct tools/call and returns its structured content (or text) as JSON.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// hostTools is what tools/list offers the host once the upstreams' first listings have landed
// (settleListing).
func hostTools(t *testing.T, cs *mcp.ClientSession) map[string]bool {
	t.Helper()
	settleListing(t, cs)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	out := map[string]bool{}
	for _, tl := range res.Tools {
		out[tl.Name] = true
	}
	return out
}

// settleListing waits until every granted upstream has been listed, with a list_tools call: a
// turn boundary, which waits for each server's first listing and brings the exposed tools up
// to date. tools/list alone waits only briefly for a server still starting (its tools follow
// with tools/list_changed), which on a loaded machine may be a mock too.
func settleListing(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	call(t, cs, "list_tools", map[string]any{})
}

// counts reads a mock's MOCK_COUNTER_FILE: how many times each tool really ran.
func counts(t *testing.T, path string) map[string]int {
	t.Helper()
	m := map[string]int{}
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return m
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("counter file %s: %v", b, err)
	}
	return m
}

// waitOrKill waits for cmd, asked to end, to exit, and kills it when it has not within d.
func waitOrKill(cmd *exec.Cmd, d time.Duration) {
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		cmd.Process.Kill()
		<-done
	}
}

// interruptOnCleanup interrupts cmd when t ends and waits until done is closed (by the goroutine
// that waits for cmd), killing cmd when it has not ended within ten seconds.
func interruptOnCleanup(t *testing.T, cmd *exec.Cmd, done <-chan struct{}) {
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
}
