//go:build linux

package bwrap_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/bwrap"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// A command (an upstream stdio server) runs under bwrap with the channel as its stdin and
// stdout, given its declared paths: it reads a read-only one and cannot write it, writes a
// read-write one (the host sees the file), and finds nothing else of the host's beside them.
func TestCommandOnTheChannel(t *testing.T) {
	requireBwrap(t, &bwrap.Options{})
	b, err := bwrap.New(context.Background(), &bwrap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Not under t.TempDir: its first directory is private to the test's user, and bwrap runs
	// as the sandbox identity, which must reach what it binds.
	base, err := os.MkdirTemp("", "mcp-sandbox-bwrap-paths-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)
	ro, rw := filepath.Join(base, "ro"), filepath.Join(base, "rw")
	for _, d := range []string{base, ro, rw} {
		if err := os.MkdirAll(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{ro, rw} {
		os.Chmod(d, 0o777)
	}
	os.Chmod(base, 0o755)
	if err := os.WriteFile(filepath.Join(ro, "in.txt"), []byte("declared"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "beside.txt"), []byte("not declared"), 0o644); err != nil {
		t.Fatal(err)
	}
	server := `import os, sys
line = sys.stdin.readline().strip()
ro, rw = os.environ["RO"], os.environ["RW"]
out = [os.environ["GREETING"] + line, open(ro + "/in.txt").read()]
try:
    open(ro + "/new.txt", "w").write("x")
    out.append("ro written")
except OSError:
    out.append("ro refused")
open(rw + "/out.txt", "w").write("from the box")
out.append(str(os.path.exists(os.path.dirname(ro) + "/beside.txt")))
sys.stdout.write(" | ".join(out) + "\n")
sys.stdout.flush()
`
	var stderr testkit.Log // written by the backend's copier while the test reads it
	c, err := b.Start(context.Background(), engine.LaunchSpec{
		Terms:      engine.Terms{Limits: engine.DefaultLimits, Network: engine.NetworkNone, Isolation: engine.LevelIsolated},
		Command:    []string{"/usr/bin/python3", "-c", server},
		CommandEnv: map[string]string{"GREETING": "echo: ", "RO": ro, "RW": rw},
		Paths:      []engine.Path{{Path: ro}, {Path: rw, Writable: true}},
		Stdout:     io.Discard, Stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c.Channel(), "ping\n")
	line, err := bufio.NewReader(c.Channel()).ReadString('\n')
	if err != nil || line != "echo: ping | declared | ro refused | False\n" {
		t.Fatalf("read %q, %v; stderr %s", line, err, stderr.String())
	}
	if e := c.Wait(); e.Code != 0 {
		t.Errorf("exit %+v; stderr %s", e, stderr.String())
	}
	if b, err := os.ReadFile(filepath.Join(rw, "out.txt")); err != nil || string(b) != "from the box" {
		t.Errorf("the host reads %q, %v from the read-write path", b, err)
	}
	if _, err := os.Stat(filepath.Join(ro, "new.txt")); err == nil || strings.Contains(stderr.String(), "Traceback") {
		t.Errorf("the read-only path was written, or the server failed: %s", stderr.String())
	}
}
