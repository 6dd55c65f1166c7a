package bootstrap_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine/bootstrap"
	"github.com/mcp-sandbox/mcp-sandbox/engine/wire"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// runProgram runs program under the bootstrap with interpreter py, in loopback mode (the
// channel a TCP connection to the test), and returns its done frame. tools are the names it may
// call, each an alias; every call is answered with a tool_error ToolError naming the tool.
func runProgram(t *testing.T, py, program string, tools ...string) wire.Done {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const token = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	cmd := exec.Command(py, "-I", "-c", bootstrap.Source, "/nonexistent/canary", "0", "0", "1000000", "cold",
		"tcp:"+strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), "HOME")
	cmd.Env = []string{"HOME=/"}
	cmd.Stdin = strings.NewReader(token + "\n")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(gate.Scaled(20 * time.Second)))
	conn, err := ln.Accept()
	if err != nil {
		t.Fatalf("the bootstrap did not connect: %v (stderr %s)", err, stderr.String())
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(gate.Scaled(60 * time.Second)))
	rd := bufio.NewReader(conn)
	for i := 0; i < 2; i++ { // the token, then the hello
		if _, err := rd.ReadString('\n'); err != nil {
			t.Fatalf("before the program: %v (stderr %s)", err, stderr.String())
		}
	}
	run, _ := json.Marshal(wire.Run{Type: "run", Program: program, Tools: tools, Aliases: tools})
	if _, err := conn.Write(append(run, '\n')); err != nil {
		t.Fatal(err)
	}
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("no done frame: %v (stderr %s)", err, stderr.String())
		}
		var frame struct {
			Type string `json:"type"`
			ID   int64  `json:"id"`
			Tool string `json:"tool"`
		}
		if err := json.Unmarshal([]byte(line), &frame); err != nil {
			t.Fatalf("frame %q: %v", line, err)
		}
		if frame.Type == "call" {
			fmt.Fprintf(conn, `{"type":"result","id":%d,"ok":false,"kind":"tool_error","message":"%s failed"}`+"\n", frame.ID, frame.Tool)
			continue
		}
		var done wire.Done
		if err := json.Unmarshal([]byte(line), &done); err != nil || done.Type != "done" {
			t.Fatalf("frame %q, %v: want done", line, err)
		}
		return done
	}
}

// A traceback's carets sit under what failed on every line, the last line of a program without
// a final newline included; a ToolError's traceback shows the program's frames only, never the
// bootstrap's (the alias, call_tool, the channel).
func TestTracebacks(t *testing.T) {
	py := python(t)
	done := runProgram(t, py, "x = 1\nprint(unknown)")
	if done.Error == nil {
		t.Fatalf("done %+v: want the NameError", done)
	}
	tb := done.Error.Traceback
	lines := strings.Split(tb, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "print(unknown)" || i+1 >= len(lines) {
			continue
		}
		col := strings.Index(l, "unknown")
		if carets := lines[i+1]; strings.Index(carets, "^") != col || strings.Count(carets, "^") != len("unknown") {
			t.Errorf("carets %q under %q: want them under unknown, at column %d\n%s", carets, l, col, tb)
		}
	}
	if !strings.Contains(tb, "^^^^^^^") {
		t.Errorf("no carets in the traceback:\n%s", tb)
	}

	done = runProgram(t, py, "async def lookup():\n    return await t__get(q=1)\n\nawait lookup()", "t__get")
	if done.Error == nil || done.Error.Type != "ToolError" {
		t.Fatalf("done %+v: want the ToolError", done)
	}
	tb = done.Error.Traceback
	if n := strings.Count(tb, `File "`); n != 2 || strings.Count(tb, `File "<program>"`) != 2 {
		t.Errorf("the traceback has %d frames: want the program's two only\n%s", n, tb)
	}
	for _, own := range []string{"alias", "call_tool", "_request", "<string>"} {
		if strings.Contains(tb, own) {
			t.Errorf("the traceback names the bootstrap's %s:\n%s", own, tb)
		}
	}
	if !strings.Contains(tb, "await t__get(q=1)") || !strings.Contains(tb, "ToolError: t__get failed") {
		t.Errorf("the traceback does not show the call and its error:\n%s", tb)
	}
}
