package bootstrap_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine/bootstrap"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

func python(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	gate.Require(t, "python", false, "no python3 here")
	return ""
}

// Socket mode: the token read from stdin is the first line on the socket, the hello frame
// follows, and every variable not named to keep is gone before the probe looks.
func TestSocketMode(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "channel.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const token = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	cmd := exec.Command(python(t), "-I", "-c", bootstrap.Source, "/nonexistent/canary", "0", "0", "1000000", "cold", sock, "HOME,KEEP_ME")
	cmd.Env = []string{"HOME=/", "KEEP_ME=1", "DROP_ME=s3cret", "HOSTNAME=sandbox"}
	cmd.Stdin = strings.NewReader(token + "\n")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	ln.(*net.UnixListener).SetDeadline(time.Now().Add(20 * time.Second))
	conn, err := ln.Accept()
	if err != nil {
		t.Fatalf("the bootstrap did not connect: %v (stderr %s)", err, stderr.String())
	}
	defer conn.Close()
	rd := bufio.NewReader(conn)
	first, err := rd.ReadString('\n')
	if err != nil || first != token+"\n" {
		t.Fatalf("first line %q, %v: want the token", first, err)
	}
	line, err := rd.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var hello struct {
		Type  string `json:"type"`
		Probe struct {
			Env []string `json:"env"`
		} `json:"probe"`
	}
	if err := json.Unmarshal([]byte(line), &hello); err != nil || hello.Type != "hello" {
		t.Fatalf("second line %q: %v", line, err)
	}
	if !slices.Equal(hello.Probe.Env, []string{"HOME", "KEEP_ME"}) {
		t.Errorf("the probe saw %v, want only the variables to keep", hello.Probe.Env)
	}
	if _, err := conn.Write([]byte(`{"type":"abort","kind":"describe","reason":"test"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the bootstrap did not exit cleanly after abort: %v (stderr %s)", err, stderr.String())
	}
}

// A socket that cannot be reached is a setup failure: exit status 125 and a line saying why.
func TestSocketModeUnreachable(t *testing.T) {
	cmd := exec.Command(python(t), "-I", "-c", bootstrap.Source, "/nonexistent/canary", "0", "0", "1000000", "cold",
		filepath.Join(t.TempDir(), "absent.sock"), "HOME")
	cmd.Stdin = strings.NewReader("token\n")
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 125 || !strings.HasPrefix(string(out), "mcp-sandbox-init: ") {
		t.Fatalf("exit %v, output %q: want status 125 and an mcp-sandbox-init line", err, out)
	}
}

// Loopback mode (Windows' channel, run here with Linux's CPython): the token read from stdin
// is the first line on a TCP connection to the host's loopback listener, then the hello; a
// program's binding call and the host's result cross the same connection (the event loop
// watches the socket), and the done frame carries the value.
func TestLoopbackMode(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	const token = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
	cmd := exec.Command(python(t), "-I", "-c", bootstrap.Source, "/nonexistent/canary", "0", "0", "1000000", "cold",
		"tcp:"+strconv.Itoa(port), "HOME")
	cmd.Env = []string{"HOME=/", "DROP_ME=s3cret"}
	cmd.Stdin = strings.NewReader(token + "\n")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(gate.Scaled(20 * time.Second)))
	conn, err := ln.Accept()
	if err != nil {
		t.Fatalf("the bootstrap did not connect: %v (stderr %s)", err, stderr.String())
	}
	defer conn.Close()
	rd := bufio.NewReader(conn)
	if first, err := rd.ReadString('\n'); err != nil || first != token+"\n" {
		t.Fatalf("first line %q, %v: want the token", first, err)
	}
	var hello struct {
		Type  string `json:"type"`
		Probe struct {
			Env []string `json:"env"`
		} `json:"probe"`
	}
	if line, err := rd.ReadString('\n'); err != nil || json.Unmarshal([]byte(line), &hello) != nil || hello.Type != "hello" {
		t.Fatalf("second line %q, %v: want the hello", line, err)
	}
	if !slices.Equal(hello.Probe.Env, []string{"HOME"}) {
		t.Errorf("the probe saw %v, want only HOME", hello.Probe.Env)
	}
	run := `{"type":"run","program":"print(42)\nv = await call_tool(\"t__echo\", {\"x\": 1})\nv + 1","tools":["t__echo"],"aliases":[]}` + "\n"
	if _, err := conn.Write([]byte(run)); err != nil {
		t.Fatal(err)
	}
	var call struct {
		Type string         `json:"type"`
		ID   int            `json:"id"`
		Tool string         `json:"tool"`
		Args map[string]int `json:"args"`
	}
	if line, err := rd.ReadString('\n'); err != nil || json.Unmarshal([]byte(line), &call) != nil || call.Type != "call" || call.Tool != "t__echo" {
		t.Fatalf("frame %q, %v: want the call (stderr %s)", line, err, stderr.String())
	}
	if _, err := fmt.Fprintf(conn, `{"type":"result","id":%d,"ok":true,"value":%d}`+"\n", call.ID, 40+call.Args["x"]); err != nil {
		t.Fatal(err)
	}
	var done struct {
		Type  string `json:"type"`
		OK    bool   `json:"ok"`
		Value int    `json:"value"`
	}
	if line, err := rd.ReadString('\n'); err != nil || json.Unmarshal([]byte(line), &done) != nil || done.Type != "done" || !done.OK || done.Value != 42 {
		t.Fatalf("frame %q, %v: want done with 42 (stderr %s)", line, err, stderr.String())
	}
	conn.Close() // the bootstrap waits for the host to close the channel, then exits
	if err := cmd.Wait(); err != nil || stdout.String() != "42\n" {
		t.Fatalf("exit %v, stdout %q: want a clean exit after printing 42 (stderr %s)", err, stdout.String(), stderr.String())
	}
}
