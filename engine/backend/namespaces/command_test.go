//go:build linux

package namespaces_test

import (
	"bufio"
	"context"
	"io"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/namespaces"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// A command (an upstream stdio server) runs contained with the channel as its stdin and
// stdout: it reads what the host writes and the host reads what it answers.
func TestCommandOnTheChannel(t *testing.T) {
	opts := namespaces.Options{}
	ok, reason := namespaces.Available(&opts)
	gate.Require(t, "namespaces", ok, reason)
	b, err := namespaces.New(context.Background(), &opts)
	if err != nil {
		t.Fatal(err)
	}
	var stderr testkit.Log // written by the backend's copier while the test reads it
	c, err := b.Start(context.Background(), engine.LaunchSpec{
		Terms:      engine.Terms{Limits: engine.DefaultLimits, Network: engine.NetworkNone, Isolation: engine.LevelIsolated},
		Command:    []string{"/usr/bin/python3", "-c", "import os, sys\nsys.stdout.write(os.environ['GREETING'] + sys.stdin.readline())\nsys.stdout.flush()"},
		CommandEnv: map[string]string{"GREETING": "echo: "}, Stdout: io.Discard, Stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c.Channel(), "ping\n")
	line, err := bufio.NewReader(c.Channel()).ReadString('\n')
	if err != nil || line != "echo: ping\n" {
		t.Fatalf("read %q, %v; stderr %s", line, err, stderr.String())
	}
	if e := c.Wait(); e.Code != 0 {
		t.Errorf("exit %+v; stderr %s", e, stderr.String())
	}
}
