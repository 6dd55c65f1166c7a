package bootstrap_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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

// A final value JSON cannot carry as it is comes back converted, with the type it was
// converted from (value_type): numpy arrays and scalars, pandas frames and series, pydantic v1
// models (Debian's python3-pydantic), dataclasses, named tuples, enums, dates and times,
// decimals, UUIDs and paths, however nested; what has no conversion is its repr, and a value
// too large to carry fails before it is copied whole.
func TestValuesAsJSON(t *testing.T) {
	py := python(t)
	has := func(module string) bool { return exec.Command(py, "-c", "import "+module).Run() == nil }
	for _, m := range []string{"numpy", "pandas", "pydantic"} {
		gate.Require(t, "python3-"+m, has(m), py+" cannot import "+m+": apt-get install python3-"+m)
	}
	for _, c := range []struct{ program, value, vtype string }{
		{"import numpy\nnumpy.array([1, 2, 3])", `[1,2,3]`, "numpy.ndarray"},
		{"import numpy\nnumpy.int64(5) * 2", `10`, "numpy.int64"},
		{"import numpy\nnumpy.array([[0.5, 1.5]])", `[[0.5,1.5]]`, "numpy.ndarray"},
		{"import numpy\n{'n': numpy.float32(0.5), 'b': numpy.bool_(True)}", `{"b":true,"n":0.5}`, ""},
		{"import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3, 4], 'b': ['x', 'y', None, 'w']})\ndf.head(3)",
			`[{"a":1,"b":"x"},{"a":2,"b":"y"},{"a":3,"b":null}]`, "pandas.DataFrame"},
		{"import pandas as pd\npd.DataFrame({'k': ['a', 'a', 'b'], 'v': [1, 2, 3]}).groupby('k').sum()",
			`[{"k":"a","v":3},{"k":"b","v":3}]`, "pandas.DataFrame"},
		{"import pandas as pd\npd.Series([1.5, None])", `[1.5,null]`, "pandas.Series"},
		{"import pandas as pd\npd.Series({'x': 1, 'y': 2})", `{"x":1,"y":2}`, "pandas.Series"},
		{"from pydantic import BaseModel\nclass User(BaseModel):\n    email: str\nUser(email='hello@pydantic.dev')",
			`{"email":"hello@pydantic.dev"}`, "User"},
		{"from dataclasses import dataclass\n@dataclass\nclass P:\n    x: int\n    tags: tuple\nP(1, ('a',))", `{"tags":["a"],"x":1}`, "P"},
		{"from collections import namedtuple\nP = namedtuple('P', 'x y')\nP(1, 2)", `{"x":1,"y":2}`, "P"},
		{"import enum\nclass C(enum.Enum):\n    RED = 'red'\nC.RED", `"red"`, "C"},
		{"import datetime\ndatetime.datetime(2024, 1, 2, 3, 4, 5)", `"2024-01-02T03:04:05"`, "datetime.datetime"},
		{"import datetime\n{'d': datetime.date(2024, 1, 2), 't': datetime.time(9, 30)}", `{"d":"2024-01-02","t":"09:30:00"}`, ""},
		{"import decimal, uuid, pathlib\n[decimal.Decimal('1.10'), uuid.UUID(int=1), pathlib.PurePosixPath('/a/b')]",
			`["1.10","00000000-0000-0000-0000-000000000001","/a/b"]`, ""},
	} {
		done := runProgram(t, py, c.program)
		if !done.OK || done.ValueRepr != nil {
			t.Errorf("%s: done %+v, want a value", c.program, done)
			continue
		}
		if mustCompact(string(done.Value)) != mustCompact(c.value) || done.ValueType != c.vtype {
			t.Errorf("%s:\n value %s (%s), want %s (%s)", c.program, done.Value, done.ValueType, c.value, c.vtype)
		}
	}
	// No conversion: the repr, as before.
	if done := runProgram(t, py, "{1, 2}"); !done.OK || done.ValueRepr == nil || *done.ValueRepr != "{1, 2}" || done.ValueType != "" {
		t.Errorf("a set: %+v", done)
	}
	// Too large for the value's ceiling (a million bytes here): refused before the array is
	// copied into a list, naming its type.
	done := runProgram(t, py, "import numpy\nnumpy.zeros(10**8, dtype=numpy.uint8)")
	if done.OK || done.Error == nil || !done.Error.NotSerializable || !strings.Contains(done.Error.Message, "numpy.ndarray") {
		t.Errorf("a 100 MB array: %+v", done.Error)
	}
}

func mustCompact(s string) string {
	var v any
	_ = json.Unmarshal([]byte(s), &v)
	b, _ := json.Marshal(v)
	return string(b)
}

// A pydantic v2 model is its model_dump(mode="json"), as pydantic's own mcp-run-python returns
// it. Debian 12 packages pydantic 1 only: the test runs the bootstrap under an interpreter that
// has pydantic 2 (python3 on PATH, or a pyenv version's).
func TestPydanticV2Value(t *testing.T) {
	var candidates []string
	if p, err := exec.LookPath("python3"); err == nil {
		candidates = append(candidates, p)
	}
	if home, err := os.UserHomeDir(); err == nil {
		found, _ := filepath.Glob(filepath.Join(home, ".pyenv", "versions", "*", "bin", "python3"))
		candidates = append(candidates, found...)
	}
	py := ""
	for _, c := range candidates {
		if out, err := exec.Command(c, "-c", "import pydantic; print(pydantic.VERSION)").Output(); err == nil && strings.HasPrefix(string(out), "2.") {
			py = c
			break
		}
	}
	gate.Require(t, "pydantic2", py != "", fmt.Sprintf("none of %v imports pydantic 2", candidates))
	done := runProgram(t, py, "from pydantic import BaseModel\nclass User(BaseModel):\n    email: str\n    joined: object = None\nUser(email='hello@pydantic.dev')")
	if !done.OK || mustCompact(string(done.Value)) != `{"email":"hello@pydantic.dev","joined":null}` || done.ValueType != "User" {
		t.Errorf("a pydantic v2 model: %+v (value %s)", done, done.Value)
	}
}
