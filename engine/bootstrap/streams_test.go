package bootstrap_test

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine/bootstrap"
)

// streamChild is the bootstrap started in stream mode (SOCKET "-"), its stdin and stdout held
// by the test as a container runtime's CLI would hold them.
type streamChild struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr strings.Builder
}

func startStreams(t *testing.T, token string) *streamChild {
	t.Helper()
	c := &streamChild{cmd: exec.Command(python(t), "-I", "-c", bootstrap.Source, "/nonexistent/canary", "0", "0", "1000000", "cold", "-", "HOME,KEEP_ME")}
	c.cmd.Env = []string{"HOME=/", "KEEP_ME=1", "DROP_ME=s3cret"}
	c.cmd.Stderr = &c.stderr
	var err error
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.stdout = bufio.NewReader(out)
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.cmd.Process.Kill(); _ = c.cmd.Wait() })
	if _, err := io.WriteString(c.stdin, token+"\n"); err != nil {
		t.Fatal(err)
	}
	first, err := c.stdout.ReadString('\n')
	if err != nil || first != token+"\n" {
		t.Fatalf("first line %q, %v: want the token (stderr %s)", first, err, c.stderr.String())
	}
	return c
}

// record reads one record: its stream and payload; stream 0 at the end of stdout.
func (c *streamChild) record(t *testing.T) (byte, string) {
	t.Helper()
	var h [8]byte
	if _, err := io.ReadFull(c.stdout, h[:]); err == io.EOF {
		return 0, ""
	} else if err != nil {
		t.Fatalf("a record's header: %v (stderr %s)", err, c.stderr.String())
	}
	if h[1]|h[2]|h[3] != 0 || (h[0] != 1 && h[0] != 3) {
		t.Fatalf("a record header % x", h)
	}
	p := make([]byte, binary.BigEndian.Uint32(h[4:]))
	if _, err := io.ReadFull(c.stdout, p); err != nil {
		t.Fatalf("a record's payload: %v", err)
	}
	return h[0], string(p)
}

// until reads records until a channel record holding want; it returns the stdout read so far.
func (c *streamChild) until(t *testing.T, want string) string {
	t.Helper()
	var stdout strings.Builder
	for {
		stream, p := c.record(t)
		switch stream {
		case 0:
			t.Fatalf("stdout ended before a frame with %q (stdout %q, stderr %s)", want, stdout.String(), c.stderr.String())
		case 1:
			stdout.WriteString(p)
		case 3:
			if strings.Contains(p, want) {
				return stdout.String()
			}
		}
	}
}

func (c *streamChild) run(t *testing.T, program string) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"type": "run", "program": program, "tools": []string{}, "aliases": map[string]string{}})
	if _, err := c.stdin.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
}

// Stream mode: the token goes back first, the hello is a channel record with only the kept
// variables, and what the program, a forked child and a subprocess write to fd 1 all arrive
// as stdout records before the done frame. Garbage the program writes to fd 3 reaches the
// host as channel bytes, as on a socket.
func TestStreamMode(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	c := startStreams(t, token)
	stream, hello := c.record(t)
	var h struct {
		Type  string `json:"type"`
		Probe struct {
			Env []string `json:"env"`
		} `json:"probe"`
	}
	if err := json.Unmarshal([]byte(hello), &h); stream != 3 || err != nil || h.Type != "hello" {
		t.Fatalf("first record: stream %d %q (%v): want the hello on the channel", stream, hello, err)
	}
	if !slices.Equal(h.Probe.Env, []string{"HOME", "KEEP_ME"}) {
		t.Errorf("the probe saw %v, want only the variables to keep", h.Probe.Env)
	}
	c.run(t, `import os, subprocess, sys
print("from print")
sys.stdout.flush()
os.write(1, b"from fd 1\n")
pid = os.fork()
if pid == 0:
    os.write(1, b"from a forked child\n")
    os._exit(0)
os.waitpid(pid, 0)
subprocess.run([sys.executable, "-c", "print('from a subprocess')"], check=True)
print("x" * 200000)
return 42`)
	stdout := c.until(t, `"type":"done"`)
	for _, want := range []string{"from print\n", "from fd 1\n", "from a forked child\n", "from a subprocess\n", strings.Repeat("x", 200000) + "\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %.40q before done: %q…", want, stdout[:min(len(stdout), 200)])
		}
	}
	c.stdin.Close() // the host closes the channel: the bootstrap exits
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("the bootstrap did not exit cleanly: %v (stderr %s)", err, c.stderr.String())
	}
}

// The host's hang-up (the end of stdin) while the program runs makes the bootstrap flush what
// the program printed and exit: nothing printed before a wall-clock kill is lost.
func TestStreamModeFlushAtHangUp(t *testing.T) {
	const token = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
	c := startStreams(t, token)
	c.until(t, `"type":"hello"`)
	c.run(t, `import sys, os
print("buffered, never flushed by the program")
os.write(1, b"running\n")
while True:
    pass`)
	// os.write is not buffered: once it arrives the program has printed and is spinning.
	var stdout strings.Builder
	for !strings.Contains(stdout.String(), "running\n") {
		stream, p := c.record(t)
		if stream == 0 {
			t.Fatalf("stdout ended before the program ran (stderr %s)", c.stderr.String())
		}
		if stream == 1 {
			stdout.WriteString(p)
		}
	}
	c.stdin.Close()
	for {
		stream, p := c.record(t)
		if stream == 0 {
			break
		}
		if stream == 1 {
			stdout.WriteString(p)
		}
	}
	if stdout.String() != "running\nbuffered, never flushed by the program\n" {
		t.Errorf("stdout after the hang-up: %q", stdout.String())
	}
	if err := c.cmd.Wait(); err != nil {
		t.Errorf("the bootstrap did not exit cleanly at the hang-up: %v", err)
	}
}
