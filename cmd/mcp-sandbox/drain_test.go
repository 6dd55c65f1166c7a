package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// TestServeShutdownDrains: SIGTERM while a program runs ends it (its tree dies, its result
// says cancelled) before serve closes its runners and ledger, and serve exits promptly.
func TestServeShutdownDrains(t *testing.T) {
	cmd := exec.Command(testkit.Binary(t), "serve", "--log-level", "info") // the test reads the run_code line
	log := testkit.NewLog(t, "server")
	cmd.Stderr = log
	ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(30*time.Second))
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "drain-test", Version: "0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	marker := fmt.Sprintf("62.%d", time.Now().UnixNano()%100000)
	go cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{
		"code": fmt.Sprintf("import subprocess, time\nsubprocess.Popen(['sleep', '%s'])\ntime.sleep(60)", marker)}})
	if !waitFor(10*time.Second, func() bool { return procsWith("sleep "+marker) > 0 }) {
		t.Fatal("the program's child never started")
	}
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The client's transport owns the process (it waits for it): the session ending is how
	// the test sees serve exit.
	exited := make(chan error, 1)
	go func() { exited <- cs.Wait() }()
	select {
	case <-exited:
	case <-time.After(gate.Scaled(15 * time.Second)):
		t.Fatal("serve did not exit within 15 s of SIGTERM")
	}
	t.Logf("serve closed the session %v after SIGTERM", time.Since(start))
	if !waitFor(5*time.Second, func() bool { return procsWith("sleep "+marker) == 0 }) {
		t.Errorf("processes of the running program outlived serve")
	}
	if !strings.Contains(log.String(), "cancelled=true") {
		t.Errorf("the running program was not ended as cancelled before serve closed")
	}
}

// TestStdioAnswersWhatWasRead is the pipe test a newcomer tries first: initialize,
// initialized, tools/list and tools/call written to serve's stdin, then stdin closed. Every
// request read before the end of the input is answered before serve exits (go-sdk alone
// answered only initialize, and exited 0).
func TestStdioAnswersWhatWasRead(t *testing.T) {
	in := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"pipe","version":"0"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/list"}
{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"6*7"}}}
`
	cmd := exec.Command(testkit.Binary(t), "serve") // the embedded default, as a newcomer has it
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir())
	cmd.Stdin = strings.NewReader(in)
	cmd.Stderr = testkit.NewLog(t, "server")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("serve: %v", err)
	}
	answered := map[float64]json.RawMessage{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var m struct {
			ID     float64         `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("stdout holds a line that is not JSON-RPC: %q", line)
		}
		answered[m.ID] = m.Result
	}
	for _, id := range []float64{1, 2, 3} {
		if answered[id] == nil {
			t.Errorf("request %v was read before stdin closed and never answered; stdout:\n%s", id, out)
		}
	}
	var call struct {
		StructuredContent struct {
			Value json.RawMessage `json:"value"`
		} `json:"structuredContent"`
	}
	_ = json.Unmarshal(answered[3], &call)
	if string(call.StructuredContent.Value) != "42" {
		t.Errorf("run_code of 6*7 answered value %s, want 42", call.StructuredContent.Value)
	}
}

// TestServeStartAndStopQuietly: a start and a normal shutdown of serve over stdio log nothing
// above info, whichever way it ends (the host closing stdin, or SIGTERM): with the embedded
// default, and with an upstream that does not leave when its stdin closes (it is killed,
// which is the end asked for, not a failure of the server's).
func TestServeStartAndStopQuietly(t *testing.T) {
	mock := testkit.MockUpstream(t)
	withUpstream := testkit.WriteConfig(t, fmt.Sprintf(`
data_dir: %q
profiles:
  default: {backend: local, isolation: process}
upstreams:
  lingering: {command: ["sh", "-c", "\"$0\"; sleep 60", %q]}
tenants:
  local:
    upstreams: [lingering]
    agents:
      default:
        code_execution: {}
`, t.TempDir(), mock))
	for _, c := range []struct {
		name   string
		config []string
		signal bool
	}{
		{"default, stdin closed", nil, false},
		{"default, SIGTERM", nil, true},
		{"an upstream, stdin closed", []string{"--config", withUpstream}, false},
		{"an upstream, SIGTERM", []string{"--config", withUpstream}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(testkit.Binary(t), append([]string{"serve", "--log-level", "info"}, c.config...)...)
			cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir())
			log := testkit.NewLog(t, "server")
			cmd.Stderr = log
			ctx, cancel := context.WithTimeout(context.Background(), gate.Scaled(30*time.Second))
			defer cancel()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "quiet-test", Version: "0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cs.ListTools(ctx, nil); err != nil {
				t.Fatal(err)
			}
			if c.config != nil { // the upstream is up once a program has called it
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": "return await lingering__add(a=2, b=3)"}})
				if err != nil || res.IsError {
					t.Fatalf("run_code through the upstream: %v %s", err, testkit.Text(res))
				}
			}
			if c.signal {
				if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				_ = cs.Wait()
			} else {
				_ = cs.Close() // closes serve's stdin, then waits for it
			}
			if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
				t.Errorf("serve ended %v, want exit status 0", cmd.ProcessState)
			}
			for _, line := range strings.Split(log.String(), "\n") {
				if !strings.Contains(line, "level=INFO") && !strings.Contains(line, "level=DEBUG") && strings.Contains(line, "level=") {
					t.Errorf("logged above info: %s", line)
				}
			}
		})
	}
}
