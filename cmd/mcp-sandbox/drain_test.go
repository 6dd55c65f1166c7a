package main

import (
	"context"
	"fmt"
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
