package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/configs"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// These tests drive the built binary as an MCP host would, with the go-sdk client.

// testConfig: profile "capped" (wall 10 s), agents with several requests.
const testConfig = `
data_dir: "-"
profiles:
  capped:
    backend: local
    isolation: process
    allow_same_uid: true
    hard_limits: {wall_seconds: 10}
tenants:
  t1:
    agents:
      wide:    {code_execution: {profile: capped, limits: {wall_seconds: 60}}}
      narrow:  {code_execution: {profile: capped, limits: {wall_seconds: 5}}}
      net:     {code_execution: {profile: capped, network: unrestricted}}
      nocode:  {expose_upstream_tools: false}
`

func connectStdio(t *testing.T, args []string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	cs, _ := connectStdioLog(t, args, opts)
	return cs
}

// connectStdioLog also returns the server's stderr as it accumulates.
func connectStdioLog(t *testing.T, args []string, opts *mcp.ClientOptions) (*mcp.ClientSession, *testkit.Log) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(20*time.Second))
	defer cancel()
	// The test reads the log: info lines too, which serve over stdio leaves out by default.
	cmd := exec.Command(testkit.Binary(t), append([]string{"serve", "--log-level", "info"}, args...)...)
	log := testkit.NewLog(t, "server")
	cmd.Stderr = log
	client := mcp.NewClient(&mcp.Implementation{Name: "serve-test", Version: "0"}, opts)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, log
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// result is the part of the structured result the tests read.
type result struct {
	Value   json.RawMessage `json:"value"`
	Stdout  string          `json:"stdout"`
	Failure *struct {
		Kind     string `json:"kind"`
		Executed bool   `json:"executed"`
	} `json:"failure"`
	Cancelled  bool              `json:"cancelled"`
	Terms      map[string]any    `json:"terms"`
	Guarantees map[string]string `json:"guarantees"`
}

func runCode(t *testing.T, ctx context.Context, cs *mcp.ClientSession, code string, progress any) (*mcp.CallToolResult, result) {
	t.Helper()
	params := &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": code}}
	if progress != nil {
		params.Meta = mcp.Meta{"progressToken": progress}
	}
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatalf("run_code: %v", err)
	}
	var r result
	b, _ := json.Marshal(res.Meta["mcp-sandbox/report"])
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("_meta report %s: %v", b, err)
	}
	return res, r
}

func TestServeStdioTools(t *testing.T) {
	cfg := testkit.WriteConfig(t, testConfig)
	got := strings.Join(toolNames(t, connectStdio(t, []string{"--config", cfg, "--agent", "wide"}, nil)), ",")
	if want := "get_tool_info,list_tools,read_tool_output,run_code"; got != want {
		t.Errorf("tools with code_execution = %s, want %s", got, want)
	}
	got = strings.Join(toolNames(t, connectStdio(t, []string{"--config", cfg, "--agent", "nocode"}, nil)), ",")
	if want := "get_tool_info,list_tools,read_tool_output"; got != want {
		t.Errorf("tools without code_execution = %s, want %s", got, want)
	}
}

func TestServeStdioRunCode(t *testing.T) {
	cs := connectStdio(t, nil, nil) // the embedded default config
	if v := cs.InitializeResult().Instructions; !strings.Contains(v, "sha256:") {
		t.Errorf("instructions do not report the agent version: %q", v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(20*time.Second))
	defer cancel()
	res, r := runCode(t, ctx, cs, "print('hi')\n6*7", nil)
	if res.IsError || string(r.Value) != "42" || r.Stdout != "hi\n" {
		t.Fatalf("run_code: isError %v, value %s, stdout %q, text %v", res.IsError, r.Value, r.Stdout, testkit.Text(res))
	}
	if r.Guarantees["wall_clock"] == "" {
		t.Errorf("no guarantees in %+v", r)
	}
	if !strings.Contains(testkit.Text(res), "value: 42") {
		t.Errorf("text rendering lacks the value: %s", testkit.Text(res))
	}
	res, r = runCode(t, ctx, cs, "raise ValueError('boom')", nil)
	if !res.IsError || r.Failure == nil || r.Failure.Kind != "program_error" || !strings.Contains(testkit.Text(res), "ValueError: boom") {
		t.Errorf("failing program: isError %v, failure %+v, text %s", res.IsError, r.Failure, testkit.Text(res))
	}
}

func TestServeLimitsNarrow(t *testing.T) {
	cfg := testkit.WriteConfig(t, testConfig)
	for agent, want := range map[string]float64{"wide": 10, "narrow": 5} {
		cs := connectStdio(t, []string{"--config", cfg, "--agent", agent}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(20*time.Second))
		res, r := runCode(t, ctx, cs, "1", nil)
		cancel()
		if res.IsError || r.Terms["wall_seconds"] != want {
			t.Errorf("agent %s: isError %v, terms %v, want wall_seconds %v (%s)", agent, res.IsError, r.Terms, want, testkit.Text(res))
		}
	}
}

func TestServeNetworkRefusal(t *testing.T) {
	cs := connectStdio(t, []string{"--config", testkit.WriteConfig(t, testConfig), "--agent", "net"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(20*time.Second))
	defer cancel()
	res, r := runCode(t, ctx, cs, "1", nil)
	if !res.IsError || r.Failure == nil || r.Failure.Kind != "network_unavailable" || r.Failure.Executed {
		t.Fatalf("want a network_unavailable refusal, got isError %v failure %+v", res.IsError, r.Failure)
	}
	lt, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_tools", Arguments: map[string]any{}})
	if err != nil || lt.IsError {
		t.Fatalf("list_tools after a refusal: %v %+v", err, lt)
	}
}

func TestServeUnknownProfile(t *testing.T) {
	cfg := testkit.WriteConfig(t, `
tenants:
  t1:
    agents:
      a1: {code_execution: {profile: nosuch}}
`)
	cmd := exec.Command(testkit.Binary(t), "serve", "--config", cfg)
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("serve with an unknown profile exited 0: %s", out)
	}
	if !strings.Contains(string(out), "nosuch") {
		t.Errorf("message does not name the profile: %s", out)
	}
}

// procsWith counts the processes whose command line contains marker.
func procsWith(marker string) int {
	n := 0
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err == nil && strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), marker) {
			n++
		}
	}
	return n
}

func waitFor(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

func TestServeCancel(t *testing.T) {
	cs, log := connectStdioLog(t, nil, nil)
	marker := fmt.Sprintf("61.%d", time.Now().UnixNano()%100000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{
			"code": fmt.Sprintf("import subprocess, time\nsubprocess.Popen(['sleep', '%s'])\ntime.sleep(60)", marker)}})
		done <- err
	}()
	if !waitFor(10*time.Second, func() bool { return procsWith("sleep "+marker) > 0 }) {
		t.Fatal("the program's child never started")
	}
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a cancelled call returned no error")
		}
	case <-time.After(gate.Scaled(5 * time.Second)):
		t.Fatal("the cancelled call did not return")
	}
	if !waitFor(time.Second, func() bool { return procsWith("sleep "+marker) == 0 }) {
		t.Fatalf("the program's tree survived the cancel by over a second")
	}
	t.Logf("tree dead %v after the cancel", time.Since(start))
	if !waitFor(2*time.Second, func() bool { return strings.Contains(log.String(), "cancelled=true") }) {
		t.Errorf("the server's record of the call does not say cancelled")
	}
	// The session keeps working after the cancel, and a new program runs.
	ctx2, cancel2 := context.WithTimeout(context.Background(), gate.Scaled(20*time.Second))
	defer cancel2()
	if res, r := runCode(t, ctx2, cs, "7", nil); res.IsError || string(r.Value) != "7" {
		t.Fatalf("run after cancel: %s", testkit.Text(res))
	}
}

func TestServeProgress(t *testing.T) {
	var mu sync.Mutex
	var got []float64
	cs := connectStdio(t, nil, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			if req.Params.ProgressToken == "tok-1" {
				got = append(got, req.Params.Progress)
			}
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(20*time.Second))
	defer cancel()
	res, _ := runCode(t, ctx, cs, "import time; time.sleep(3)", "tok-1")
	if res.IsError {
		t.Fatalf("program failed: %s", testkit.Text(res))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) < 2 {
		t.Fatalf("progress notifications: %v, want at least 2 during a 3 s program", got)
	}
}

// HTTP

const httpConfig = `
data_dir: "-"
profiles:
  default: {backend: local, isolation: process}
tenants:
  a:
    tokens: ["%s"]
    agents:
      default: {code_execution: {}}
  b:
    tokens: ["%s"]
    agents:
      bee: {code_execution: {}}
`

// startHTTP starts serve --transport http on a free loopback port and returns its base URL.
func startHTTP(t *testing.T, cfg string) string {
	t.Helper()
	return startHTTPEnv(t, cfg, nil)
}

// startHTTPEnv starts the server with extra environment variables.
func startHTTPEnv(t *testing.T, cfg string, env []string) string {
	t.Helper()
	base, _ := startHTTPProc(t, cfg, env)
	return base
}

// startHTTPProc is startHTTPEnv that also returns the server's process.
func startHTTPProc(t *testing.T, cfg string, env []string) (string, *exec.Cmd) {
	t.Helper()
	return startHTTPArgs(t, cfg, env)
}

// startHTTPArgs is startHTTPProc with extra serve flags.
func startHTTPArgs(t *testing.T, cfg string, env []string, extra ...string) (string, *exec.Cmd) {
	t.Helper()
	return startHTTPWatching(t, cfg, env, nil, extra...)
}

// startHTTPWatching is startHTTPArgs that also calls onLine with the server process and each
// line it logs, from the line reader, before the server is serving too.
func startHTTPWatching(t *testing.T, cfg string, env []string, onLine func(*exec.Cmd, string), extra ...string) (string, *exec.Cmd) {
	t.Helper()
	args := append([]string{"serve", "--transport", "http", "--listen", "127.0.0.1:0"}, extra...)
	if cfg != "" {
		args = append(args, "--config", cfg)
	}
	cmd := exec.Command(testkit.Binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`addr=(\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			t.Logf("server: %s", sc.Text())
			if onLine != nil {
				onLine(cmd, sc.Text())
			}
			if m := re.FindStringSubmatch(sc.Text()); m != nil && strings.Contains(sc.Text(), "serving over") {
				addr <- m[1]
			}
		}
		io.Copy(io.Discard, stderr)
		close(addr)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatal("server exited before listening")
		}
		return "http://" + a, cmd
	case <-time.After(gate.Scaled(20 * time.Second)):
		t.Fatal("server did not start")
	}
	return "", nil
}

// initializeRequest is a 2025-06-18 initialize POSTed to url, with token as the bearer (none
// when empty): what the HTTP gates in front of the MCP handler decide on.
func initializeRequest(url, token string) *http.Request {
	req, _ := http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"0"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req
}

// send sends req and returns the response with its body closed, for its status and headers.
func send(t *testing.T, req *http.Request) *http.Response {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func TestServeHTTP(t *testing.T) {
	cfg := testkit.WriteConfig(t, fmt.Sprintf(httpConfig, configs.HashToken("token-a"), configs.HashToken("token-b")))
	base := startHTTP(t, cfg)
	do := func(path, token, host string) int {
		req := initializeRequest(base+path, token)
		if host != "" {
			req.Host = host
		}
		return send(t, req).StatusCode
	}
	for _, c := range []struct {
		name, path, token, host string
		want                    int
	}{
		{"no token", "/mcp", "", "", 401},
		{"unknown token", "/mcp", "nope", "", 401},
		{"own default agent", "/mcp", "token-a", "", 200},
		{"own agent", "/mcp/bee", "token-b", "", 200},
		{"other tenant's agent", "/mcp/bee", "token-a", "", 404},
		{"foreign host", "/mcp", "token-a", "evil.example", 403},
	} {
		if got := do(c.path, c.token, c.host); got != c.want {
			t.Errorf("%s: status %d, want %d", c.name, got, c.want)
		}
	}
	resp, err := http.Get(base + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("/healthz: %v %v", err, resp)
	}
	resp.Body.Close()

	resp, err = http.Get(base + "/readyz")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("/readyz: %v %v", err, resp)
	}
	resp.Body.Close()

	// Two tenants' concurrent sessions each see their own results.
	ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(20*time.Second))
	defer cancel()
	var wg sync.WaitGroup
	for i, c := range []struct{ path, token string }{{"/mcp", "token-a"}, {"/mcp/bee", "token-b"}, {"/mcp", "token-a"}, {"/mcp/bee", "token-b"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := mcp.NewClient(&mcp.Implementation{Name: "serve-test", Version: "0"}, nil)
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
				Endpoint:   base + c.path,
				HTTPClient: &http.Client{Transport: bearer{c.token}},
			}, nil)
			if err != nil {
				t.Error(err)
				return
			}
			defer cs.Close()
			want := fmt.Sprintf("%q", fmt.Sprintf("%s-%d", c.token, i))
			for range 3 {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": "import time; time.sleep(0.2); " + want}})
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := json.Marshal(res.Meta["mcp-sandbox/report"])
				var r result
				json.Unmarshal(b, &r)
				if res.IsError || string(r.Value) != want {
					t.Errorf("session %d: value %s, want %s (%s)", i, r.Value, want, testkit.Text(res))
				}
			}
		}()
	}
	wg.Wait()
}

// The embedded default has one tenant and no tokens: on loopback it needs none.
func TestServeHTTPTokenlessLoopback(t *testing.T) {
	base := startHTTP(t, "")
	client := mcp.NewClient(&mcp.Implementation{Name: "serve-test", Version: "0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(20*time.Second))
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if res, r := runCode(t, ctx, cs, "6*7", nil); res.IsError || string(r.Value) != "42" {
		t.Fatalf("run_code: %s", testkit.Text(res))
	}
}

func TestServeHelp(t *testing.T) {
	out, err := exec.Command(testkit.Binary(t), "serve", "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--transport") || !strings.Contains(string(out), "/mcp/{agent}") {
		t.Fatalf("serve --help: %v\n%s", err, out)
	}
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func TestServeHTTPRefusesOpenListener(t *testing.T) {
	cmd := exec.Command(testkit.Binary(t), "serve", "--transport", "http", "--listen", "0.0.0.0:0")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "token") {
		t.Fatalf("serve beyond loopback without tokens: err %v, output %s", err, out)
	}
}

// TestServeDefaultConfigBuiltins runs a program under the embedded default config, which
// grants no upstreams: list_tools and get_tool_info still answer (from an empty catalogue),
// run_code is refused as excluded_builtin, and an unknown name is unavailable.
func TestServeDefaultConfigBuiltins(t *testing.T) {
	cs := connectStdio(t, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(30*time.Second))
	defer cancel()
	res, r := runCode(t, ctx, cs, `
out = {}
page = await list_tools()
out["tools"] = len(page["tools"])
for name, args in [("run_code", {"code": "1"}), ("get_tool_info", {"name": "x__y"}), ("nope", {})]:
    try:
        await call_tool(name, args)
        out[name] = "ok"
    except ToolError as e:
        out[name] = e.kind
return out
`, nil)
	if res.IsError || r.Failure != nil {
		t.Fatalf("program failed: %s", testkit.Text(res))
	}
	var got map[string]any
	if err := json.Unmarshal(r.Value, &got); err != nil {
		t.Fatalf("value %s: %v", r.Value, err)
	}
	want := map[string]any{"tools": float64(0), "run_code": "excluded_builtin", "get_tool_info": "unavailable", "nope": "unavailable"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (value %s)", k, got[k], v, r.Value)
		}
	}
}

// TestServeHTTPTokenlessEndsWhenTokensAdded: a loopback server for one tenant without tokens
// serves token-less requests only until a reload (SIGHUP) adds a token; from then on a
// request without one is refused and the token is accepted.
// TestServeSIGHUPDuringStartup: a SIGHUP that arrives while the server is still starting
// (its first log line is written before the profiles are opened) is a reload, not the end of
// the process, which is SIGHUP's default action until something subscribes to it.
func TestServeSIGHUPDuringStartup(t *testing.T) {
	cfg := testkit.WriteConfig(t, fmt.Sprintf(httpConfig, configs.HashToken("token-a"), configs.HashToken("token-b")))
	var once sync.Once
	reloaded := make(chan struct{})
	base, _ := startHTTPWatching(t, cfg, nil, func(cmd *exec.Cmd, line string) {
		once.Do(func() {
			if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Error(err)
			}
		})
		if strings.Contains(line, "config reloaded") {
			select {
			case <-reloaded:
			default:
				close(reloaded)
			}
		}
	})
	select {
	case <-reloaded:
	case <-time.After(gate.Scaled(20 * time.Second)):
		t.Fatal("the SIGHUP sent during startup was never acted on")
	}
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatalf("the server does not answer after a SIGHUP during startup: %v", err)
	}
	resp.Body.Close()
}

func TestServeHTTPTokenlessEndsWhenTokensAdded(t *testing.T) {
	const cfgText = `
data_dir: "-"
profiles: {default: {}}
tenants:
  t:
    tokens: [%s]
    agents: {default: {code_execution: {}}}
`
	cfg := testkit.WriteConfig(t, fmt.Sprintf(cfgText, ""))
	base, cmd := startHTTPProc(t, cfg, nil)
	post := func(token string) int { return send(t, initializeRequest(base+"/mcp", token)).StatusCode }
	if got := post(""); got != http.StatusOK {
		t.Fatalf("token-less before the reload: status %d, want 200", got)
	}
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(cfgText, strconv.Quote(configs.HashToken("tok-1")))), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if !waitFor(10*time.Second, func() bool { return post("") == http.StatusUnauthorized }) {
		t.Fatalf("token-less after tokens were added: status %d, want 401", post(""))
	}
	if got := post("tok-1"); got != http.StatusOK {
		t.Errorf("with the new token: status %d, want 200", got)
	}
}
