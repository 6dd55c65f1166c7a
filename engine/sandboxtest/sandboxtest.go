package sandboxtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
)

// Config describes the backend under test.
type Config struct {
	// Level is the isolation level the backend claims to reach.
	Level engine.Level
	// New returns a sandbox whose hard limits are ceiling and which collects artifacts with
	// the default limits. It is called once per Run.
	New func(t *testing.T, ceiling engine.Limits) engine.Sandbox
	// Network is the network the programs of RunKernelSurface ask for ("": none, as every
	// case of Run asks): a backend whose terms with network change its containment (the
	// container backend's network-granting seccomp profile) runs the kernel cases under them.
	Network engine.Network
}

// marker appears in the command line of every sandbox child (the bootstrap's first line) and
// of the helpers hostile programs start, so survivors can be found by scanning /proc.
const (
	bootstrapMarker = "# mcp-sandbox bootstrap"
	survivorMarker  = "mcp-sandbox-survivor-marker"
	// templateMarker is the first line of a template's (engine/backend/namespaces), which a
	// child forked from it keeps in its command line: such a process whose parent has it too
	// (a template's own parent is the init helper) is an execution's.
	templateMarker = "# mcp-sandbox template"
)

// Run runs the whole contract against one backend.
func Run(t *testing.T, cfg Config) {
	sb := cfg.New(t, engine.DefaultLimits)
	c := &contract{cfg: cfg, sb: sb}
	t.Run("value and stdout", c.valueAndStdout)
	t.Run("await and return", c.awaitAndReturn)
	t.Run("program error keeps stdout and names the line", c.programError)
	t.Run("syntax error names its line", c.syntaxError)
	t.Run("a value JSON cannot carry comes back as its repr", c.notSerializable)
	t.Run("no state between executions", c.noState)
	t.Run("environment built from nothing", c.environment)
	t.Run("guarantees are graded", c.guarantees)
	t.Run("tool calls without a caller are unavailable", c.noTools)
	t.Run("artifacts, and what is never collected", c.artifacts)
	t.Run("output written before a kill is kept", c.keptAtKill)
	t.Run("hostile", func(t *testing.T) {
		gate.Hostile(t)
		for _, h := range Hostile {
			if h.run != nil {
				t.Run(h.Name, func(t *testing.T) { h.run(c, t) })
			}
		}
	})
}

// RunKernelSurface runs the kernel attack surface cases of Hostile alone (nested namespaces
// and mounts, netlink, the keyring calls and a keyring across tenants, the i386 ABI), under
// cfg.Network: each must be refused there too.
func RunKernelSurface(t *testing.T, cfg Config) {
	gate.Hostile(t)
	c := &contract{cfg: cfg, sb: cfg.New(t, engine.DefaultLimits)}
	for _, h := range Hostile {
		if h.kernel {
			t.Run(h.Name, func(t *testing.T) { h.run(c, t) })
		}
	}
}

type contract struct {
	cfg Config
	sb  engine.Sandbox
}

// network is what the contract's programs ask for: none, unless RunKernelSurface's config
// names another.
func (c *contract) network() engine.Network {
	if c.cfg.Network == "" {
		return engine.NetworkNone
	}
	return c.cfg.Network
}

func (c *contract) run(t *testing.T, program string, lim engine.Limits) *engine.Outcome {
	t.Helper()
	return c.runCtx(t, context.Background(), program, lim)
}

func (c *contract) runCtx(t *testing.T, ctx context.Context, program string, lim engine.Limits) *engine.Outcome {
	t.Helper()
	start := time.Now()
	res := c.sb.Run(ctx, engine.Execution{Program: program, Terms: engine.Terms{Limits: lim, Isolation: c.cfg.Level, Network: c.network()}})
	if res == nil {
		t.Fatal("Run returned nil")
	}
	wall := res.Terms.WallSeconds
	if el, slack := time.Since(start).Seconds(), 5*gate.Scale(); el > wall+slack {
		t.Errorf("the execution took %.1fs, past its wall clock of %gs + %.0fs", el, wall, slack)
	}
	return res
}

func wantOK(t *testing.T, r *engine.Outcome) {
	t.Helper()
	if r.Failure != nil {
		t.Fatalf("failure %s: %s\n%s\nstderr: %s", r.Failure.Kind, r.Failure.Message, r.Failure.Traceback, r.Stderr)
	}
}

func wantKind(t *testing.T, r *engine.Outcome, k failure.Kind, limit engine.LimitName) {
	t.Helper()
	if r.Failure == nil {
		t.Fatalf("want failure %s, got none (value %s, stdout %q)", k, r.Value, r.Stdout)
	}
	if r.Failure.Kind != k {
		t.Fatalf("want failure %s, got %s: %s\n%s\nstderr: %s", k, r.Failure.Kind, r.Failure.Message, r.Failure.Traceback, r.Stderr)
	}
	got := engine.LimitName("")
	if r.LimitHit != nil {
		got = *r.LimitHit
	}
	if got != limit {
		t.Fatalf("want limit_hit %q, got %q (%s)", limit, got, r.Failure.Message)
	}
}

func value(t *testing.T, r *engine.Outcome, into any) {
	t.Helper()
	if err := json.Unmarshal(r.Value, into); err != nil {
		t.Fatalf("value %s: %v", r.Value, err)
	}
}

func (c *contract) valueAndStdout(t *testing.T) {
	r := c.run(t, `print("hi"); 6*7`, engine.Limits{})
	wantOK(t, r)
	if r.Stdout != "hi\n" || string(r.Value) != "42" || r.StdoutSize != 3 {
		t.Fatalf("stdout %q (size %d), value %s; want \"hi\\n\" and 42", r.Stdout, r.StdoutSize, r.Value)
	}
}

func (c *contract) awaitAndReturn(t *testing.T) {
	r := c.run(t, "import asyncio\nawait asyncio.sleep(0)\nreturn {\"a\": 1}\nprint('not reached')", engine.Limits{})
	wantOK(t, r)
	if string(r.Value) != `{"a":1}` || r.Stdout != "" {
		t.Fatalf("value %s stdout %q, want {\"a\":1} and nothing printed", r.Value, r.Stdout)
	}
}

func (c *contract) programError(t *testing.T) {
	r := c.run(t, "print('before')\nx = 1\ny = x / 0\nprint('after')", engine.Limits{})
	wantKind(t, r, failure.ProgramError, "")
	if !strings.Contains(r.Failure.Traceback, "line 3") || !strings.Contains(r.Failure.Traceback, "ZeroDivisionError") {
		t.Fatalf("traceback does not name line 3 and ZeroDivisionError:\n%s", r.Failure.Traceback)
	}
	if strings.Contains(r.Failure.Traceback, "bootstrap") {
		t.Errorf("traceback shows the bootstrap's frames:\n%s", r.Failure.Traceback)
	}
	if r.Stdout != "before\n" || !r.Failure.Executed {
		t.Fatalf("stdout %q executed %v; want the output before the error kept", r.Stdout, r.Failure.Executed)
	}
}

func (c *contract) syntaxError(t *testing.T) {
	r := c.run(t, "x = 1\n\ndef broken(:\n    pass", engine.Limits{})
	wantKind(t, r, failure.ProgramError, "")
	if !strings.Contains(r.Failure.Traceback, "line 3") || !strings.Contains(r.Failure.Message, "SyntaxError") {
		t.Fatalf("syntax error not located: %s\n%s", r.Failure.Message, r.Failure.Traceback)
	}
}

// notSerializable: a final value JSON cannot carry as it is and the child knows no conversion
// for completes, with value null and its repr in value_repr; only a value whose repr fails too
// is value_not_serializable. One it converts (a date) is JSON, with the type it came from.
func (c *contract) notSerializable(t *testing.T) {
	r := c.run(t, "import datetime\ndatetime.date(2026, 1, 2)", engine.Limits{})
	wantOK(t, r)
	if string(r.Value) != `"2026-01-02"` || r.ValueRepr != nil || r.ValueType != "datetime.date" {
		t.Errorf("a date: value %s (%s), value_repr %v; want \"2026-01-02\" from datetime.date", r.Value, r.ValueType, r.ValueRepr)
	}
	for program, want := range map[string]string{
		"{'s': {1, 2}}": "{'s': {1, 2}}",
		"b'ab'":         "b'ab'",
		"class Point:\n    def __repr__(self):\n        return 'Point(1, 2)'\nPoint()": "Point(1, 2)",
		"float('nan')": "nan",
	} {
		r := c.run(t, program, engine.Limits{})
		wantOK(t, r)
		if string(r.Value) != "null" || r.ValueRepr == nil || *r.ValueRepr != want {
			t.Errorf("%q: value %s, value_repr %v; want null and %q", program, r.Value, r.ValueRepr, want)
		}
	}
	r = c.run(t, "print('kept')\nclass Broken:\n    def __repr__(self):\n        raise RuntimeError('no repr for you')\nBroken()", engine.Limits{})
	wantKind(t, r, failure.ValueNotSerializable, "")
	if !strings.Contains(r.Failure.Message, "no repr for you") || r.Stdout != "kept\n" {
		t.Fatalf("message %q, stdout %q: want the repr's error and the output kept", r.Failure.Message, r.Stdout)
	}
	r = c.run(t, "6*7", engine.Limits{})
	if b, _ := json.Marshal(r); strings.Contains(string(b), "value_repr") {
		t.Errorf("a JSON value's result carries value_repr: %s", b)
	}
}

func (c *contract) noState(t *testing.T) {
	r := c.run(t, "import os\nopen('left-behind', 'w').write('x')\nglobal_value = 1\nos.getcwd()", engine.Limits{})
	wantOK(t, r)
	var first string
	value(t, r, &first)
	r = c.run(t, "import os\n[os.listdir('.'), 'global_value' in globals(), os.getcwd()]", engine.Limits{})
	wantOK(t, r)
	var got []any
	value(t, r, &got)
	if len(got[0].([]any)) != 0 || got[1] != false {
		t.Fatalf("the second execution saw the first one's state: %v", got)
	}
	if got[2] == first {
		t.Fatalf("the workspace %v was reused", first)
	}
	if _, err := os.Stat(first); err == nil {
		t.Fatalf("the first workspace %s still exists on the host", first)
	}
}

func (c *contract) environment(t *testing.T) {
	r := c.run(t, "import os\nsorted(os.environ)", engine.Limits{})
	wantOK(t, r)
	var names []string
	value(t, r, &names)
	for _, n := range names {
		switch n {
		case "HOME", "TMPDIR", "PATH", "PYTHONDONTWRITEBYTECODE", "LC_CTYPE":
		default:
			t.Errorf("unexpected variable %s in the child's environment", n)
		}
	}
	if r.Guarantees.Get(engine.DimEnvironment) != engine.Enforced {
		t.Errorf("environment graded %s", r.Guarantees.Get(engine.DimEnvironment))
	}
}

func (c *contract) guarantees(t *testing.T) {
	r := c.run(t, "None", engine.Limits{})
	wantOK(t, r)
	for _, d := range engine.Dimensions {
		if _, ok := r.Guarantees[d]; !ok {
			t.Errorf("dimension %s not graded", d)
		}
	}
	if r.Guarantees.Get(engine.DimWallClock) != engine.Enforced || r.Guarantees.Get(engine.DimCPU) != engine.Enforced ||
		r.Guarantees.Get(engine.DimMemory) != engine.Enforced || r.Guarantees.Get(engine.DimFileSize) != engine.Enforced {
		t.Errorf("limits not enforced: %v", r.Guarantees)
	}
	if !r.Isolation.AtLeast(c.cfg.Level) {
		t.Errorf("isolation %s, the backend claims %s", r.Isolation, c.cfg.Level)
	}
	if r.Guarantees.Get(engine.DimFilesystem) == engine.Unavailable {
		t.Errorf("the child read the canary: filesystem graded unavailable")
	}
	if !r.NetworkDenied || r.Guarantees.Get(engine.DimNetwork) == engine.Unavailable {
		t.Errorf("network reachable: denied=%v grade=%s", r.NetworkDenied, r.Guarantees.Get(engine.DimNetwork))
	}
}

func (c *contract) noTools(t *testing.T) {
	r := c.run(t, "try:\n    await call_tool('x__y', {})\nexcept ToolError as e:\n    return [e.kind, e.tool, TOOLS]", engine.Limits{})
	wantOK(t, r)
	if string(r.Value) != `["unavailable","x__y",[]]` {
		t.Fatalf("value %s", r.Value)
	}
}

func (c *contract) artifacts(t *testing.T) {
	prog := `import os
os.makedirs("out")
with open("out/data.csv", "w") as f:
    f.write("sku,count\nA,1\nB,2\n")
with open("plot.png", "wb") as f:
    f.write(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
with open("big.txt", "w") as f:
    f.write("x" * 4999 + "\n")
os.symlink("/etc/passwd", "etc-passwd")
os.mkfifo("pipe")
"written"`
	r := c.run(t, prog, engine.Limits{})
	wantOK(t, r)
	got := map[string]outputs.Attachment{}
	for _, a := range r.Artifacts {
		got[a.Name] = a
	}
	if a := got["out/data.csv"]; a.Size != 18 || a.ContentType != "text/csv; charset=utf-8" && a.ContentType != "text/csv" {
		t.Errorf("out/data.csv: %+v", a)
	}
	if a := got["plot.png"]; a.Size != 264 || a.ContentType != "image/png" {
		t.Errorf("plot.png: %+v", a)
	}
	// A few bytes of text come back whole, in the result; binary data and text over the
	// preview size do not.
	if a := got["out/data.csv"]; a.Text == nil || *a.Text != "sku,count\nA,1\nB,2\n" || a.Location != "inline" {
		t.Errorf("out/data.csv: text %v, location %s; want its content inline", a.Text, a.Location)
	}
	if a := got["plot.png"]; a.Text != nil || a.Location == "inline" {
		t.Errorf("plot.png: text %v, location %s; want no text", a.Text, a.Location)
	}
	if a := got["big.txt"]; a.Size != 5000 || a.Text != nil || a.Location == "inline" {
		t.Errorf("big.txt: %d bytes, text %v, location %s; want no text over the 4000-byte preview", a.Size, a.Text != nil, a.Location)
	}
	if len(r.Artifacts) != 3 || len(r.ArtifactFiles) != 3 || string(r.ArtifactFiles[1].Data) != "sku,count\nA,1\nB,2\n" {
		t.Errorf("artifacts %+v (%d files)", r.Artifacts, len(r.ArtifactFiles))
	}
	omitted := map[string]string{}
	for _, o := range r.ArtifactsOmit {
		omitted[o.Path] = o.Reason
	}
	if !strings.Contains(omitted["etc-passwd"], "link") || !strings.Contains(omitted["pipe"], "fifo") {
		t.Errorf("artifacts_omitted %+v: want the symlink and the fifo, each with its reason", r.ArtifactsOmit)
	}
}

// ---- hostile ----

// profClock is the clock id of the calling process's CPUCLOCK_PROF clock, the one RLIMIT_CPU
// is checked against (the kernel's MAKE_PROCESS_CPUCLOCK(0, CPUCLOCK_PROF)).
const profClock = "-8"

// cpuSpin: the program reports its CPU time as RLIMIT_CPU counts it as it spins, so the test
// can tell when it was killed by that clock, not by the wall clock: on a loaded machine 2 s of
// CPU take 8-15 s of wall time, and the kernel's clock is ahead of rusage. A limit not enforced
// at all ends at the wall clock (timeout); one enforced late or early shows in the last report.
func (c *contract) cpuSpin(t *testing.T) {
	r := c.run(t, `import signal, time
for s in (signal.SIGXCPU, signal.SIGTERM, signal.SIGINT):
    signal.signal(s, signal.SIG_IGN)
mark, n = 0.0, 0
while True:
    n += 1
    if n % 10000 == 0:
        cpu = time.clock_gettime(`+profClock+`)
        if cpu >= mark:
            print("cpu %.3f" % cpu, flush=True)
            mark = cpu + 0.1`, engine.Limits{CPUSeconds: 2})
	wantKind(t, r, failure.LimitExceeded, engine.LimitCPU)
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	last, err := strconv.ParseFloat(strings.TrimPrefix(lines[len(lines)-1], "cpu "), 64)
	if err != nil {
		t.Fatalf("no report of the CPU time used in stdout %q", r.Stdout)
	}
	// SIGXCPU (at 2 s, the soft limit) ignored, the kernel kills in the tick that clock
	// reaches the hard limit, CPUGraceSeconds later: nothing runs past that tick. The limit
	// is checked at scheduler ticks (4 ms at 250 Hz), so a report read in the tick that
	// reaches it may show the limit itself (3.000, seen in CI) or a tick past it.
	hard := float64(2 + engine.CPUGraceSeconds)
	const tick = 0.02 // a scheduler tick at 100 Hz, with room
	if last > hard+tick || last < hard-0.5 {
		t.Errorf("the program last reported %.3fs of CPU, want killed at %gs of it", last, hard)
	}
	c.noSurvivors(t)
}

// selfKill: a program that kills itself with SIGKILL just before its CPU limit is not the
// limit's, however near it came. Where the interpreter is its pid namespace's init (bwrap),
// the kernel drops the signal and the program goes on.
func (c *contract) selfKill(t *testing.T) {
	r := c.run(t, `import os, time
while time.clock_gettime(`+profClock+`) < 0.9:
    pass
print("killing myself", flush=True)
os.kill(os.getpid(), 9)
"survived"`, engine.Limits{CPUSeconds: 1})
	if r.Failure == nil && string(r.Value) == `"survived"` {
		t.Logf("the kernel dropped the program's SIGKILL of itself")
		return
	}
	wantKind(t, r, failure.ProgramError, "")
	c.noSurvivors(t)
}

func (c *contract) sleeper(t *testing.T) {
	seconds := c.wallAfterStart(t)
	start := time.Now()
	r := c.run(t, "import time\nprint('going to sleep', flush=True)\ntime.sleep(600)", engine.Limits{WallSeconds: seconds})
	wantKind(t, r, failure.Timeout, engine.LimitWall)
	within(t, start, seconds+2)
	if r.Stdout != "going to sleep\n" {
		t.Errorf("output before the timeout lost: %q", r.Stdout)
	}
	c.noSurvivors(t)
}

func (c *contract) memory(t *testing.T) {
	start := time.Now()
	r := c.run(t, "x = bytearray(2 << 30)\nlen(x)", engine.Limits{MemoryBytes: 512 << 20})
	wantKind(t, r, failure.LimitExceeded, engine.LimitMemory)
	if !strings.Contains(r.Failure.Traceback, "MemoryError") {
		t.Errorf("no MemoryError in the traceback:\n%s", r.Failure.Traceback)
	}
	within(t, start, r.Terms.WallSeconds)
}

func (c *contract) fileSize(t *testing.T) {
	start := time.Now()
	r := c.run(t, "with open('big', 'wb') as f:\n    for _ in range(100):\n        f.write(b'x' * (1 << 20))", engine.Limits{FileSizeBytes: 10 << 20})
	wantKind(t, r, failure.LimitExceeded, engine.LimitFileSize)
	within(t, start, r.Terms.WallSeconds)
}

func (c *contract) forkBomb(t *testing.T) {
	c.bomb(t, "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.01)")
}

// bomb runs a fork bomb (program) under 5 s of wall clock and 32 processes: it must fail
// within that wall clock and slack, leave no process, and leave the sandbox answering.
func (c *contract) bomb(t *testing.T, program string) {
	t.Helper()
	start := time.Now()
	r := c.run(t, program, engine.Limits{WallSeconds: 5, ProcessCount: 32})
	if r.Failure == nil {
		t.Fatalf("a fork bomb completed")
	}
	within(t, start, 5+2)
	c.noSurvivors(t)
	c.answersNext(t)
}

// sessionForkBomb: every process of the bomb leads a session of its own, so no process group
// or session holds the tree; only what holds the whole tree can end it.
func (c *contract) sessionForkBomb(t *testing.T) {
	c.bomb(t, "import os, time\nwhile True:\n    try:\n        if os.fork() == 0:\n            os.setsid()\n    except OSError:\n        time.sleep(0.01)")
}

func (c *contract) threadBomb(t *testing.T) {
	r := c.run(t, "import threading, time\nts = []\nwhile True:\n    t = threading.Thread(target=time.sleep, args=(60,), daemon=True)\n    t.start()\n    ts.append(t)", engine.Limits{WallSeconds: 5, ProcessCount: 32})
	if r.Failure == nil {
		t.Fatalf("a thread bomb completed")
	}
	c.noSurvivors(t)
	c.answersNext(t)
}

func (c *contract) grandchild(t *testing.T) {
	prog := fmt.Sprintf(`import os, sys, time
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", %q])
    os._exit(0)
os.waitpid(pid, 0)
time.sleep(0.2)
"started"`, survivorMarker)
	r := c.run(t, prog, engine.Limits{})
	wantOK(t, r)
	c.noSurvivors(t)
	c.answersNext(t)
}

func (c *contract) floodStdout(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := c.run(t, "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.write(chunk)\nsys.stdout.flush()\n'done'", engine.Limits{WallSeconds: 60})
	runtime.ReadMemStats(&after)
	wantOK(t, r)
	if r.StdoutSize != 1<<30 {
		t.Fatalf("stdout_size %d, want %d", r.StdoutSize, 1<<30)
	}
	if len(r.Stdout) > 4000 || !strings.Contains(r.Stdout, "elided") {
		t.Fatalf("preview of %d bytes, want ≤ 4000 with an elision", len(r.Stdout))
	}
	if !r.Attachments[0].Truncated {
		t.Errorf("stdout attachment not marked truncated")
	}
	if grew := int64(after.TotalAlloc - before.TotalAlloc); grew > 64<<20 {
		t.Fatalf("the host allocated %d MiB for 1 GiB of output", grew>>20)
	}
}

func (c *contract) garbage(t *testing.T) {
	r := c.run(t, "import os, time\nos.write(3, b'this is not a frame\\n')\ntime.sleep(30)", engine.Limits{WallSeconds: 20})
	wantKind(t, r, failure.ProtocolViolation, "")
	c.noSurvivors(t)
}

func (c *contract) forged(t *testing.T) {
	r := c.run(t, "import os, time\nos.write(3, b'{\"type\":\"done\",\"ok\":true,\"value\":1,\"Value\":2}\\n')\ntime.sleep(30)", engine.Limits{WallSeconds: 20})
	wantKind(t, r, failure.ProtocolViolation, "")
	r = c.run(t, "import os, time\nos.write(3, b'{\"type\":\"hello\",\"version\":1,\"probe\":{}}\\n')\ntime.sleep(30)", engine.Limits{WallSeconds: 20})
	wantKind(t, r, failure.ProtocolViolation, "")
}

func (c *contract) hugeLine(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r := c.run(t, "import os\nchunk = b'x' * (1 << 20)\nfor _ in range(100):\n    os.write(3, chunk)\nimport time\ntime.sleep(30)", engine.Limits{WallSeconds: 20})
	runtime.ReadMemStats(&after)
	wantKind(t, r, failure.ProtocolViolation, "")
	if grew := int64(after.TotalAlloc - before.TotalAlloc); grew > 200<<20 {
		t.Errorf("the host allocated %d MiB reading one line", grew>>20)
	}
	c.noSurvivors(t)
}

func (c *contract) callFlood(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	r := c.run(t, `import json, os
frame = (json.dumps({"type": "call", "id": 1, "tool": "x__y", "args": {"pad": "x" * 65536}}) + "\n").encode()
while True:
    os.write(3, frame)`, engine.Limits{WallSeconds: 3})
	runtime.ReadMemStats(&after)
	within(t, start, 3+2)
	if r.Failure == nil {
		t.Fatal("a call flood completed")
	}
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 64<<20 {
		t.Errorf("the host holds %d MiB more after a call flood", grew>>20)
	}
	c.noSurvivors(t)
}

func (c *contract) closeChannel(t *testing.T) {
	start := time.Now()
	r := c.run(t, "import os, time\nos.close(3)\ntime.sleep(30)", engine.Limits{WallSeconds: 20})
	wantKind(t, r, failure.ProtocolViolation, "")
	// Well before the wall clock: the interpreter's start before it closes the channel takes
	// CPU, which a loaded machine gives out slowly.
	within(t, start, 20/2)
	c.noSurvivors(t)
}

func (c *contract) secrets(t *testing.T) {
	secret := "s3cret-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Setenv("MCP_SANDBOX_TEST_SECRET", secret)
	prog := `import os, glob
found = {}
def look(path):
    try:
        with open(path, 'rb') as f:
            data = f.read(1 << 20)
        found[path] = SECRET.encode() in data
        return True
    except OSError:
        return False
readable = {p: look(p) for p in ['/etc/shadow', '/proc/1/environ', '/proc/%d/environ' % os.getppid(), '/proc/self/environ']}
{"uid": os.getuid(), "env_has_secret": any(SECRET in v for v in os.environ.values()), "found": found, "readable": readable}
`
	r := c.run(t, "SECRET = "+strconv.Quote(secret)+"\n"+prog, engine.Limits{})
	wantOK(t, r)
	var got struct {
		UID          int             `json:"uid"`
		EnvHasSecret bool            `json:"env_has_secret"`
		Found        map[string]bool `json:"found"`
		Readable     map[string]bool `json:"readable"`
	}
	value(t, r, &got)
	if got.EnvHasSecret {
		t.Errorf("the host's secret reached the child's environment")
	}
	for p, f := range got.Found {
		if f {
			t.Errorf("the child read the host's secret from %s", p)
		}
	}
	if got.Readable["/etc/shadow"] {
		t.Errorf("the child read /etc/shadow")
	}
	if os.Geteuid() == 0 {
		// Every local backend's run_as defaults to 65534:65534 (nobody).
		if got.UID != 65534 {
			t.Errorf("the child runs as uid %d, want the run_as uid 65534", got.UID)
		}
		if r.Guarantees.Get(engine.DimIdentity) != engine.Enforced {
			t.Errorf("identity graded %s", r.Guarantees.Get(engine.DimIdentity))
		}
	}
}

func (c *contract) killParent(t *testing.T) {
	if os.Geteuid() != 0 {
		gate.AppliesOnly(t, false, "only meaningful when the child runs as another uid than the host")
	}
	// Whatever the program's parent is inside the sandbox (the host under the process backend,
	// an init of the sandbox's own under bwrap), the host survives and answers the next one.
	r := c.run(t, "import os\nos.kill(os.getppid(), 9)", engine.Limits{})
	if r.Failure != nil && r.Failure.Kind != failure.ProgramError {
		t.Fatalf("want completion or program_error (PermissionError), got %+v", r.Failure)
	}
	c.answersNext(t)
}

// poseAsSetupFailure: a program that ran, then exits the way a failed init helper does, is
// still a program that ran: never a refusal that says nothing ran.
func (c *contract) poseAsSetupFailure(t *testing.T) {
	r := c.run(t, "import os, sys\nprint('mcp-sandbox-init: pretend', file=sys.stderr, flush=True)\nos._exit(125)", engine.Limits{})
	if r.Failure == nil || r.Failure.Kind.Refusal() || !r.Failure.Executed {
		t.Fatalf("want a failure of a program that ran, got %+v", r.Failure)
	}
}

func (c *contract) cancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(700 * time.Millisecond); cancel() }()
	start := time.Now()
	r := c.runCtx(t, ctx, fmt.Sprintf("import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', %q])\ntime.sleep(60)", survivorMarker), engine.Limits{})
	wantKind(t, r, failure.Cancelled, "")
	if !r.Cancelled {
		t.Errorf("cancelled is false")
	}
	within(t, start, 0.7+1)
	c.noSurvivors(t)
}

func within(t *testing.T, start time.Time, seconds float64) {
	t.Helper()
	seconds *= gate.Scale()
	if el := time.Since(start).Seconds(); el > seconds {
		t.Errorf("returned after %.2fs, want within %.1fs", el, seconds)
	}
}

func (c *contract) answersNext(t *testing.T) {
	t.Helper()
	r := c.run(t, "6*7", engine.Limits{})
	wantOK(t, r)
	if string(r.Value) != "42" {
		t.Fatalf("the next execution answered %s", r.Value)
	}
}

// parentForked reports whether /proc/pid's parent runs a template's code: pid was forked
// by a template, or by one of its children.
func parentForked(pid string) bool {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			cmdline, err := os.ReadFile(filepath.Join("/proc", strings.TrimSpace(v), "cmdline"))
			return err == nil && bytes.Contains(cmdline, []byte(templateMarker))
		}
	}
	return false
}

// noSurvivors fails when any process of an execution is still alive: a bootstrap interpreter
// or a helper a hostile program started (of this test binary's: gate.Ours).
func (c *contract) noSurvivors(t *testing.T) {
	t.Helper()
	var alive []string
	deadline := time.Now().Add(500 * time.Millisecond)
	for {
		alive = alive[:0]
		ours := gate.Ours()
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			if pid, err := strconv.Atoi(e.Name()); err != nil || !ours(pid) {
				continue
			}
			cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err != nil || len(cmdline) == 0 {
				continue // gone, or a zombie
			}
			if bytes.Contains(cmdline, []byte(bootstrapMarker)) || bytes.Contains(cmdline, []byte(survivorMarker)) ||
				bytes.Contains(cmdline, []byte(templateMarker)) && parentForked(e.Name()) {
				alive = append(alive, e.Name())
			}
		}
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("processes of a finished execution are still alive: pids %v", alive)
}
