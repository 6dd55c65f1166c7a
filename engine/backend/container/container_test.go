//go:build linux

package container_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/container"
	"github.com/mcp-sandbox/mcp-sandbox/engine/sandboxtest"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
)

// helperEnv makes the test binary a server that starts one long execution and waits to be
// killed (TestSweep): its value is the state directory.
const helperEnv = "MCP_SANDBOX_CONTAINER_TEST_SERVER"

// slowRuntimeEnv makes the test binary, run under the name podman, a runtime whose `run`
// reports the container's end late (TestOOMKillGradedWhileTheRuntimeIsSlow): its value is
// the real runtime's path.
const slowRuntimeEnv = "MCP_SANDBOX_CONTAINER_TEST_SLOW_RUNTIME"

// runHelpers makes the test binary a helper server or a slow runtime when it was started as
// one (TestMain, main_test.go).
func runHelpers() {
	if dir := os.Getenv(helperEnv); dir != "" {
		os.Exit(serveUntilKilled(dir))
	}
	if real := os.Getenv(slowRuntimeEnv); real != "" && filepath.Base(os.Args[0]) == "podman" {
		os.Exit(slowRuntime(real, os.Args[1:]))
	}
}

// serveUntilKilled writes its owner id to dir/owner, then runs a program that sleeps.
func serveUntilKilled(dir string) int {
	b, err := container.New(context.Background(), &container.Options{StateDir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	r, err := engine.NewRunner(b, &engine.RunnerOptions{Isolation: engine.LevelIsolated})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Progress is called once the program runs: only then is the container past the point
	// where the server's death would end it anyway (a bootstrap still waiting for its program
	// exits when the channel closes). A running program ends on that hang-up too, after
	// flushing its output, unless it ignores SIGIO, as this one does: what sweeping is for.
	var once sync.Once
	r.Run(context.Background(), engine.Execution{Program: "import signal, time\nsignal.signal(signal.SIGIO, signal.SIG_IGN)\ntime.sleep(600)",
		Terms: engine.Terms{Limits: engine.Limits{WallSeconds: 600}, Isolation: engine.LevelIsolated},
		Progress: func(float64, *outputs.Capture) {
			once.Do(func() { _ = os.WriteFile(filepath.Join(dir, "owner"), []byte(b.Owner()), 0o600) })
		}})
	return 0
}

// slowRuntime runs the real runtime with args; a `run` returns its status only
// slowRuntimeDelay after the runtime did, as a runtime whose monitor or removal is held up
// would. One process: a kill of it leaves nothing behind.
func slowRuntime(real string, args []string) int {
	if len(args) > 0 && args[0] == "inspect" && os.Getenv(slowInspectEnv) != "" {
		time.Sleep(slowInspectDelay)
	}
	if !slices.Contains(args, "run") || os.Getenv(slowInspectEnv) != "" {
		err := syscall.Exec(real, append([]string{real}, args...), os.Environ())
		fmt.Fprintln(os.Stderr, err)
		return 125
	}
	cmd := exec.Command(real, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	time.Sleep(slowRuntimeDelay)
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode()
	case err != nil:
		return 125
	}
	return 0
}

// slowRuntimeDelay is past the bound the backend ever waited for a runtime's report (10 s)
// plus the moment a Runner gives an exit after the channel's end.
const slowRuntimeDelay = 12 * time.Second

// slowInspectEnv, set beside slowRuntimeEnv, slows the runtime's `inspect` by slowInspectDelay
// instead of its `run`: an engine elsewhere answering slowly what ended a container.
const slowInspectEnv = "MCP_SANDBOX_CONTAINER_TEST_SLOW_INSPECT"

// slowInspectDelay is past the moment a Runner gives an exit after the channel's end.
const slowInspectDelay = 2 * time.Second

// requireContainer skips (or fails, where MCP_SANDBOX_REQUIRE names "container") unless a
// runtime answers and the default image is present: `mcp-sandbox image build` (make
// sandbox-image) builds it.
func requireContainer(t *testing.T, opts container.Options) {
	t.Helper()
	d := container.Detect(context.Background(), &opts)
	gate.Require(t, "container", d.Available, d.Reason)
}

func newBackend(t *testing.T, opts container.Options) *container.Backend {
	t.Helper()
	requireContainer(t, opts)
	b, err := container.New(context.Background(), &opts)
	if err != nil {
		t.Fatalf("container.New: %v", err)
	}
	return b
}

func newRunner(t *testing.T, ceiling engine.Limits, opts container.Options) *engine.Runner {
	t.Helper()
	requireContainer(t, opts)
	b, err := container.New(context.Background(), &opts)
	return sandboxtest.Runner(t, b, err, &engine.RunnerOptions{Ceiling: ceiling, Isolation: engine.LevelIsolated,
		Artifacts: engine.ArtifactPolicy{Collect: true}})
}

func TestContract(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Config{
		Level: engine.LevelIsolated,
		New: func(t *testing.T, ceiling engine.Limits) engine.Sandbox {
			return newRunner(t, ceiling, container.Options{})
		},
	})
}

// The standard streams with an engine on this host (MCP_SANDBOX_DISABLE=socket): the channel an
// engine in a VM gets, whose whole contract TestRemoteEngine runs, with what only a local
// engine adds, the interpreter's pid from the execution's cgroup (its exit, its workspace, the
// OOM count). One backend: a value with its output, the artifacts read through that pid, a
// timeout, an OOM kill.
func TestStreamsOnALocalEngine(t *testing.T) {
	r := newRunner(t, engine.DefaultLimits, container.Options{Disable: []string{"socket"}})
	res := run(t, r, "import os\nopen('out.txt', 'w').write('kept')\nprint('hi')\n6*7", engine.Limits{})
	if res.Failure != nil || string(res.Value) != "42" || res.Stdout != "hi\n" {
		t.Fatalf("value %s, stdout %q, failure %+v", res.Value, res.Stdout, res.Failure)
	}
	if len(res.Artifacts) != 1 || res.Artifacts[0].Name != "out.txt" || res.Artifacts[0].Size != 4 {
		t.Errorf("artifacts %+v, omitted %+v: want out.txt", res.Artifacts, res.ArtifactsOmit)
	}
	res = run(t, r, "import time\nprint('waiting', flush=True)\ntime.sleep(60)", engine.Limits{WallSeconds: 2})
	if res.Failure == nil || res.Failure.Kind != failure.Timeout || res.Stdout != "waiting\n" {
		t.Errorf("want a timeout with the output kept, got %+v, stdout %q", res.Failure, res.Stdout)
	}
	res = run(t, r, "i = 0\nwhile True:\n    with open('/dev/shm/f%d' % i, 'wb') as f:\n        f.write(b'x' * (4 << 20))\n    i += 1",
		engine.Limits{MemoryBytes: 48 << 20})
	if res.Failure == nil || res.Failure.Kind != failure.LimitExceeded || res.LimitHit == nil || *res.LimitHit != engine.LimitMemory {
		t.Errorf("want memory_bytes exceeded by an OOM kill, got %+v (limit %v)", res.Failure, res.LimitHit)
	}
}

func wantValue(t *testing.T, res *engine.Outcome, into any) {
	t.Helper()
	if res.Failure != nil {
		t.Fatalf("failure %s: %s\n%s\nstderr: %s", res.Failure.Kind, res.Failure.Message, res.Failure.Traceback, res.Stderr)
	}
	if err := json.Unmarshal(res.Value, into); err != nil {
		t.Fatalf("value %s: %v", res.Value, err)
	}
}

// podman runs the backend's runtime CLI and returns its trimmed output.
func podman(t *testing.T, b *container.Backend, args ...string) string {
	t.Helper()
	out, err := exec.Command(b.Runtime().Path, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v: %s", b.Runtime().Kind, args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// containersOf lists the containers, running or not, that carry owner's label.
func containersOf(t *testing.T, b *container.Backend, owner string) []string {
	t.Helper()
	return strings.Fields(podman(t, b, "ps", "-a", "-q", "--filter", "label="+container.OwnerLabel+"="+owner))
}

// cgroupsOf lists the execution cgroups of owner left in any hierarchy.
func cgroupsOf(owner string) []string {
	var out []string
	for _, pattern := range []string{"/sys/fs/cgroup/*/mcp-sandbox/" + owner + "-*", "/sys/fs/cgroup/mcp-sandbox/" + owner + "-*"} {
		m, _ := filepath.Glob(pattern)
		out = append(out, m...)
	}
	return out
}

// A program in the container cannot open a second connection to the channel: once the
// bootstrap has presented its token the socket is gone. It never sees the token either: stdin
// is empty by the time it runs.
func TestSecondConnectionRefused(t *testing.T) {
	r := newRunner(t, engine.DefaultLimits, container.Options{})
	res := run(t, r, `import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect("/run/mcp-sandbox/channel.sock")
    s.sendall(b"0" * 64 + b"\n")
    outcome = "connected"
except OSError as e:
    outcome = type(e).__name__
[outcome, os.listdir("/run/mcp-sandbox"), sys.stdin.read()]`, engine.Limits{})
	var got []any
	wantValue(t, res, &got)
	if got[0] == "connected" {
		t.Fatalf("a second connection to the channel was accepted: %v", got)
	}
	if entries := got[1].([]any); len(entries) != 0 {
		t.Errorf("the socket directory still lists %v after the child connected", entries)
	}
	if got[2] != "" {
		t.Errorf("the program read %q from stdin, want nothing (the token is consumed)", got[2])
	}
}

// A program cannot reach the host's loopback, over IPv4 or IPv6: the container has a network
// namespace of its own with only its own loopback.
func TestHostLoopbackUnreachable(t *testing.T) {
	r := newRunner(t, engine.DefaultLimits, container.Options{})
	ports := map[string]int{}
	var accepted atomic.Int32
	for _, a := range []struct{ network, addr string }{{"tcp4", "127.0.0.1:0"}, {"tcp6", "[::1]:0"}} {
		l, err := net.Listen(a.network, a.addr)
		if err != nil {
			t.Logf("no %s listener here: %v", a.network, err)
			continue
		}
		t.Cleanup(func() { l.Close() })
		ports[a.network] = l.Addr().(*net.TCPAddr).Port
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				accepted.Add(1)
				c.Close()
			}
		}()
	}
	if len(ports) == 0 {
		gate.Require(t, "loopback", false, "no loopback listener could be opened")
	}
	res := run(t, r, fmt.Sprintf(`import socket
out = {}
for fam, host, port in ((socket.AF_INET, "127.0.0.1", %d), (socket.AF_INET6, "::1", %d)):
    if port == 0:
        continue
    try:
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect((host, port))
        out[host] = "reached"
    except OSError as e:
        out[host] = type(e).__name__
out`, ports["tcp4"], ports["tcp6"]), engine.Limits{})
	var got map[string]string
	wantValue(t, res, &got)
	for host, outcome := range got {
		if outcome == "reached" {
			t.Errorf("the program reached the host's %s", host)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the host's loopback listeners accepted %d connections from the sandbox", n)
	}
	if !res.NetworkDenied || res.Guarantees.Get(engine.DimNetwork) != engine.Enforced {
		t.Errorf("network graded %s, denied %v", res.Guarantees.Get(engine.DimNetwork), res.NetworkDenied)
	}
}

// --pull=never holds: an image that is not present is a refusal that says what to run, and
// nothing was fetched, whether it is missing when the backend is made or vanishes before an
// execution.
func TestMissingImageIsRefusedNeverPulled(t *testing.T) {
	b := newBackend(t, container.Options{})
	defer b.Close()
	rnd := strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, image := range []string{"localhost/mcp-sandbox-absent:" + rnd, "docker.io/library/python:3.0-absent-" + rnd} {
		start := time.Now()
		_, err := container.New(context.Background(), &container.Options{Image: image})
		if err == nil || failure.KindOf(err) != failure.BackendUnavailable {
			t.Fatalf("New with the missing image %s: %v, want backend_unavailable", image, err)
		}
		if msg := err.Error(); !strings.Contains(msg, "never pulled") || !strings.Contains(msg, "pull "+image) {
			t.Errorf("the refusal does not say what to run: %s", msg)
		}
		if el := time.Since(start); el > 15*time.Second {
			t.Errorf("refusing took %v: something was fetched or waited for", el)
		}
		if exec.Command(b.Runtime().Path, "image", "exists", image).Run() == nil {
			t.Errorf("the image %s is present afterwards: it was pulled", image)
		}
	}
	_, err := container.New(context.Background(), &container.Options{Image: "localhost/mcp-sandbox-python:absent-" + rnd})
	if err == nil || !strings.Contains(err.Error(), "mcp-sandbox image build") {
		t.Errorf("a missing tag of the sandbox image does not point at mcp-sandbox image build: %v", err)
	}

	// An image that goes away after the backend was made: the run itself pulls nothing.
	tag := "localhost/mcp-sandbox-test:vanishing-" + rnd
	podman(t, b, "tag", b.Image(), tag)
	r := newRunner(t, engine.DefaultLimits, container.Options{Image: tag})
	podman(t, b, "rmi", tag) // removes this tag only
	res := run(t, r, "6*7", engine.Limits{})
	if res.Failure == nil || res.Failure.Kind != failure.BackendUnavailable || res.Failure.Executed {
		t.Fatalf("a run with the image gone: %+v, want backend_unavailable, nothing executed", res.Failure)
	}
	if !strings.Contains(res.Failure.Message, "never pulled") {
		t.Errorf("the refusal does not say the image is never pulled: %s", res.Failure.Message)
	}
	if exec.Command(b.Runtime().Path, "image", "exists", tag).Run() == nil {
		t.Errorf("the image %s is present again: it was pulled", tag)
	}
}

// On a hybrid cgroup layout crun cannot run containers: the backend picks runc by itself and
// says so, and a profile that names crun is refused with what to do. Elsewhere crun is fine.
func TestHybridCgroupLayout(t *testing.T) {
	b := newBackend(t, container.Options{})
	defer b.Close()
	if b.Runtime().Kind != "podman" {
		gate.AppliesOnly(t, false, "the OCI runtime is chosen by docker's daemon")
	}
	_, err := container.New(context.Background(), &container.Options{OCIRuntime: "crun"})
	if !container.HybridCgroups() {
		if err != nil && strings.Contains(err.Error(), "hybrid") {
			t.Fatalf("crun refused on a host without a hybrid layout: %v", err)
		}
		return
	}
	if err == nil || failure.KindOf(err) != failure.BackendUnavailable || !strings.Contains(err.Error(), "hybrid") || !strings.Contains(err.Error(), "runc") {
		t.Fatalf("crun on a hybrid layout: %v, want a refusal naming the layout and runc", err)
	}
	if !slices.ContainsFunc(b.Mechanisms(), func(m string) bool { return strings.HasPrefix(m, "oci-runtime runc (") }) {
		t.Errorf("mechanisms %v do not say runc was picked, and why", b.Mechanisms())
	}
}

// No container, socket directory or cgroup is left after any result: a value, a timeout, a
// cancellation, an OOM kill. Closing the backend removes its directory.
func TestNothingLeftAfterAResult(t *testing.T) {
	state := t.TempDir()
	b := newBackend(t, container.Options{StateDir: state})
	r, err := engine.NewRunner(b, &engine.RunnerOptions{Isolation: engine.LevelIsolated})
	if err != nil {
		t.Fatal(err)
	}
	ownerDir := filepath.Join(state, "mcp-sandbox-"+b.Owner())
	check := func(what string) {
		t.Helper()
		if ids := containersOf(t, b, b.Owner()); len(ids) > 0 {
			t.Errorf("%s: containers left: %v", what, ids)
		}
		// The seccomp profiles stay for the backend's life; nothing of an execution does.
		entries, err := os.ReadDir(ownerDir)
		var left []string
		for _, e := range entries {
			if n := e.Name(); n != "seccomp.json" && n != "seccomp-network-none.json" {
				left = append(left, n)
			}
		}
		if err != nil || len(left) != 0 {
			t.Errorf("%s: the owner directory holds %v (%v), want only the seccomp profiles", what, left, err)
		}
		if cg := cgroupsOf(b.Owner()); len(cg) > 0 {
			t.Errorf("%s: cgroups left: %v", what, cg)
		}
	}
	res := run(t, r, "6*7", engine.Limits{})
	if string(res.Value) != "42" {
		t.Fatalf("value %s, failure %+v", res.Value, res.Failure)
	}
	check("a value")
	res = run(t, r, "import time\ntime.sleep(60)", engine.Limits{WallSeconds: 1})
	if res.Failure == nil || res.Failure.Kind != failure.Timeout {
		t.Fatalf("want a timeout, got %+v", res.Failure)
	}
	check("a timeout")
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	res = r.Run(ctx, engine.Execution{Program: "import time\ntime.sleep(60)", Terms: engine.Terms{Isolation: engine.LevelIsolated}})
	cancel()
	if res.Failure == nil || res.Failure.Kind != failure.Cancelled {
		t.Fatalf("want a cancellation, got %+v", res.Failure)
	}
	check("a cancellation")
	// Files in the container's tmpfs count against its memory cgroup and no rlimit: the
	// kernel's OOM killer ends the interpreter, and the memory those files hold (which only
	// the container's end frees) must not keep it from ending.
	start := time.Now()
	res = run(t, r, "i = 0\nwhile True:\n    with open('/dev/shm/f%d' % i, 'wb') as f:\n        f.write(b'x' * (4 << 20))\n    i += 1",
		engine.Limits{MemoryBytes: 48 << 20})
	if res.Failure == nil || res.Failure.Kind != failure.LimitExceeded || res.LimitHit == nil || *res.LimitHit != engine.LimitMemory {
		t.Fatalf("want memory_bytes exceeded by an OOM kill, got %+v (limit %v)", res.Failure, res.LimitHit)
	}
	if el := time.Since(start); el > 15*time.Second {
		t.Errorf("an OOM kill took %v to become a result", el)
	}
	check("an OOM kill")
	r.Close()
	if _, err := os.Stat(ownerDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the owner directory outlived the backend: %v", err)
	}
}

// The memory limit's OOM kill is graded as memory_bytes however late the runtime reports the
// container's end: the kernel's count says so before any protocol verdict. A runtime that
// reports it later than any bound (its monitor charged to the same full memory limit, a busy
// host) once made this a protocol_violation.
func TestOOMKillGradedWhileTheRuntimeIsSlow(t *testing.T) {
	gate.Require(t, "cgroup", os.Geteuid() == 0, "the OOM count is read from the execution's cgroup, which only root makes")
	real, err := exec.LookPath("podman")
	gate.Require(t, "container", err == nil, "the slow runtime wraps podman, which is not installed")
	b, r := slowRuntimeRunner(t, real)
	res := run(t, r, "i = 0\nwhile True:\n    with open('/dev/shm/f%d' % i, 'wb') as f:\n        f.write(b'x' * (4 << 20))\n    i += 1",
		engine.Limits{MemoryBytes: 48 << 20})
	if res.Failure == nil || res.Failure.Kind != failure.LimitExceeded || res.LimitHit == nil || *res.LimitHit != engine.LimitMemory {
		t.Fatalf("want memory_bytes exceeded by an OOM kill, got %+v (limit %v)", res.Failure, res.LimitHit)
	}
	// The late runtime was killed and the container removed all the same.
	if ids := containersOf(t, b, b.Owner()); len(ids) > 0 {
		t.Errorf("containers left: %v", ids)
	}
	if cg := cgroupsOf(b.Owner()); len(cg) > 0 {
		t.Errorf("cgroups left: %v", cg)
	}
}

// slowRuntimeRunner is an isolated Runner on a backend whose runtime is this test binary under
// the name podman, passing its commands on to real, slowed as slowRuntimeEnv (and
// slowInspectEnv, when the test set it) say. The Runner is closed when the test ends.
func slowRuntimeRunner(t *testing.T, real string) (*container.Backend, *engine.Runner) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	slow := filepath.Join(t.TempDir(), "podman")
	if err := os.Symlink(exe, slow); err != nil {
		t.Fatal(err)
	}
	t.Setenv(slowRuntimeEnv, real)
	b := newBackend(t, container.Options{Runtime: slow, StateDir: t.TempDir()})
	r, err := engine.NewRunner(b, &engine.RunnerOptions{Isolation: engine.LevelIsolated})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return b, r
}

// A CPU limit's kill is graded as cpu_seconds however long the engine takes to say the kill was
// not the OOM killer's: the channel ends only once the container's exit is known. Read before
// that (inspect slowed past the Runner's grace, as a loaded host made it in CI), it was a child
// that closed its channel and kept running.
func TestCPULimitGradedWhileTheEngineIsSlowToSay(t *testing.T) {
	real := remoteEngine(t)
	path, err := exec.LookPath(real)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(slowInspectEnv, "1")
	_, r := slowRuntimeRunner(t, path)
	res := run(t, r, "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass", engine.Limits{CPUSeconds: 1})
	if res.Failure == nil || res.Failure.Kind != failure.LimitExceeded || res.LimitHit == nil || *res.LimitHit != engine.LimitCPU {
		t.Fatalf("want cpu_seconds exceeded, got %+v (limit %v)", res.Failure, res.LimitHit)
	}
}

// A server killed outright leaves its container running; the next backend removes it and its
// cgroup, found by label and name wherever the dead server's directory went (a restarted
// service's private /tmp is a new one), and its directory from the state directory, because
// internal/owner proves the dead server's owner tag dead. A live owner's container is left
// alone, and so is every container that is not provably a dead owner's: an older version's
// label (no tag), an owner of another pid namespace with no lock here, no label at all.
func TestSweepRemovesOnlyDeadOwners(t *testing.T) {
	state := t.TempDir()
	live := newBackend(t, container.Options{StateDir: state})
	defer live.Close()
	liveRunner, err := engine.NewRunner(live, &engine.RunnerOptions{Isolation: engine.LevelIsolated})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	liveDone := make(chan *engine.Outcome, 1)
	go func() {
		liveDone <- liveRunner.Run(ctx, engine.Execution{Program: "import time\ntime.sleep(600)",
			Terms: engine.Terms{Limits: engine.Limits{WallSeconds: 120}, Isolation: engine.LevelIsolated}})
	}()
	defer func() {
		cancel()
		<-liveDone
		liveRunner.Close()
	}()

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	server := exec.Command(exe)
	server.Env = append(os.Environ(), helperEnv+"="+state)
	server.Stderr = os.Stderr
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	defer server.Process.Kill()
	running := func(b *container.Backend, owner string) bool {
		out := podman(t, b, "ps", "-q", "--filter", "label="+container.OwnerLabel+"="+owner, "--filter", "status=running")
		return out != ""
	}
	var dead string
	deadline := time.Now().Add(gate.Scaled(60 * time.Second))
	for dead == "" || !running(live, dead) || !running(live, live.Owner()) {
		if time.Now().After(deadline) {
			t.Fatalf("the server's and the live owner's containers did not start (server owner %q): %s", dead, podman(t, live, "ps", "-a", "--format", "{{.Names}} {{.Status}} {{.Labels}}"))
		}
		select {
		case res := <-liveDone:
			t.Fatalf("the live owner's execution ended early: %+v\nstderr: %s", res.Failure, res.Stderr)
		case <-time.After(100 * time.Millisecond):
		}
		if b, err := os.ReadFile(filepath.Join(state, "owner")); err == nil {
			dead = string(b)
		}
	}
	_ = server.Process.Kill()
	_ = server.Wait()
	if !running(live, dead) {
		t.Fatalf("the killed server's container did not outlive it: nothing to sweep: %s", podman(t, live, "ps", "-a", "--format", "{{.Names}} {{.Status}} {{.Labels}}"))
	}
	if len(cgroupsOf(dead)) == 0 && live.Mechanisms()[len(live.Mechanisms())-1] != "runtime-memory-limit" {
		t.Error("the killed server's cgroup is gone already: nothing to sweep")
	}

	// Decoys, stopped containers of this test's: labelled by an older version (no tag), by an
	// owner of another pid namespace that holds no lock here, and one unlabelled, named as
	// the dead owner's containers are.
	f := strings.Split(strings.Split(dead, "-")[1], ".")
	decoys := map[string]string{
		"old":     "--label=" + container.OwnerLabel + "=0123456789ab",
		"otherns": "--label=" + container.OwnerLabel + "=ctr-" + f[0] + "." + f[1] + ".1." + f[3] + "-00112233",
		"nolabel": "--label=io.mcp-sandbox.decoy=1",
	}
	var decoyIDs []string
	t.Cleanup(func() {
		for _, id := range decoyIDs { // one at a time: a decoy a failed sweep removed is no error here
			_ = exec.Command(live.Runtime().Path, "rm", "--force", id).Run()
		}
	})
	for what, label := range decoys {
		name := "mcp-sandbox-" + dead + "-decoy" + what
		decoyIDs = append(decoyIDs, podman(t, live, "create", "--pull=never", label, "--name", name, live.Image(), "true"))
	}

	// A server with another state directory sweeps the containers and cgroups, not the
	// directory it cannot see.
	sweeper := newBackend(t, container.Options{StateDir: t.TempDir()})
	defer sweeper.Close()
	if ids := containersOf(t, live, dead); len(ids) > 0 {
		t.Errorf("the dead owner's containers are still there: %v", ids)
	}
	if cg := cgroupsOf(dead); len(cg) > 0 {
		t.Errorf("the dead owner's cgroups are still there: %v", cg)
	}
	deadDir := filepath.Join(state, "mcp-sandbox-"+dead)
	if _, err := os.Stat(deadDir); err != nil {
		t.Errorf("the dead owner's directory, in another state directory, is gone: %v", err)
	}
	newBackend(t, container.Options{StateDir: state}).Close()
	if _, err := os.Stat(deadDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead owner's directory is still there: %v", err)
	}
	if !running(live, live.Owner()) {
		t.Error("the sweep removed a live owner's container")
	}
	if _, err := os.Stat(filepath.Join(state, "mcp-sandbox-"+live.Owner())); err != nil {
		t.Errorf("the sweep removed a live owner's directory: %v", err)
	}
	for _, id := range decoyIDs {
		if out := podman(t, live, "ps", "-a", "-q", "--no-trunc", "--filter", "id="+id); out == "" {
			t.Errorf("the sweep removed decoy %s, which no dead owner of this program made", id)
		}
	}
}

// The environment is built from nothing plus the allowlist: an allowlisted variable arrives
// with its value, and nothing the runtime or the image adds (HOSTNAME, container, an image's
// ENV) is left.
func TestEnvironmentAllowlist(t *testing.T) {
	requireContainer(t, container.Options{})
	b, err := container.New(context.Background(), &container.Options{Env: map[string]string{"MCP_SANDBOX_TEST_ALLOWED": "v 1"}})
	r := sandboxtest.Runner(t, b, err, &engine.RunnerOptions{Isolation: engine.LevelIsolated, EnvAllowlist: []string{"MCP_SANDBOX_TEST_ALLOWED"}})
	res := run(t, r, "import os\ndict(os.environ)", engine.Limits{})
	var env map[string]string
	wantValue(t, res, &env)
	if env["MCP_SANDBOX_TEST_ALLOWED"] != "v 1" {
		t.Errorf("the allowlisted variable arrived as %q", env["MCP_SANDBOX_TEST_ALLOWED"])
	}
	for name := range env {
		switch name {
		case "HOME", "TMPDIR", "PATH", "PYTHONDONTWRITEBYTECODE", "LC_CTYPE", "MCP_SANDBOX_TEST_ALLOWED":
		default:
			t.Errorf("unexpected variable %s=%q", name, env[name])
		}
	}
	if res.Guarantees.Get(engine.DimEnvironment) != engine.Enforced {
		t.Errorf("environment graded %s", res.Guarantees.Get(engine.DimEnvironment))
	}
}

// The contract suite's survivor scan reads this process's /proc for the bootstrap's marker.
// It is meaningful here because podman's containers descend from the `podman run` the backend
// starts: the container's interpreter (pid 1 of a pid namespace nested in this one) shows in
// this /proc while it runs, and is gone once the result is back.
func TestSurvivorScanSeesTheContainer(t *testing.T) {
	b := newBackend(t, container.Options{})
	if b.Runtime().Kind != "podman" {
		gate.AppliesOnly(t, false, "docker's daemon starts containers outside this pid namespace")
	}
	r, err := engine.NewRunner(b, &engine.RunnerOptions{Isolation: engine.LevelIsolated})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var seen atomic.Bool
	res := r.Run(context.Background(), engine.Execution{Program: "import time\ntime.sleep(2.5)", Terms: engine.Terms{Isolation: engine.LevelIsolated},
		Progress: func(float64, *outputs.Capture) { seen.Store(seen.Load() || len(containerInterpreters(t)) > 0) }})
	if res.Failure != nil {
		t.Fatalf("failure %+v", res.Failure)
	}
	if !seen.Load() {
		t.Fatal("the container's interpreter never showed in this /proc while it ran")
	}
	if pids := containerInterpreters(t); len(pids) > 0 {
		t.Fatalf("the container's interpreter outlived its result: %v", pids)
	}
}

// containerInterpreters lists the processes in this /proc that run the bootstrap as pid 1 of
// a pid namespace nested in this one.
func containerInterpreters(t *testing.T) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		status, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if !strings.Contains(string(cmdline), "# mcp-sandbox bootstrap") {
			continue
		}
		for _, line := range strings.Split(string(status), "\n") {
			if f := strings.Fields(strings.TrimPrefix(line, "NSpid:")); strings.HasPrefix(line, "NSpid:") && len(f) >= 2 && f[len(f)-1] == "1" {
				out = append(out, e.Name())
			}
		}
	}
	return out
}

// Two concurrent executions (two tenants') each run in a user namespace of their own, whose
// ids map to host ids no other execution holds, and under the policy's profile, not the
// runtime's default: the filter the kernel shows is ours (one filter, and a netlink socket to
// netfilter refused with the policy's EACCES, which podman's default profile allows).
func TestOwnUserNamespacePerExecution(t *testing.T) {
	b := newBackend(t, container.Options{})
	if b.Runtime().Kind != "podman" || os.Geteuid() != 0 {
		gate.AppliesOnly(t, false, "only podman as root maps each execution's ids itself")
	}
	r := sandboxtest.Runner(t, b, nil, &engine.RunnerOptions{Isolation: engine.LevelIsolated})
	program := `import os, socket, time
status = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
try:
    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12).close()
    netfilter = "made"
except OSError as e:
    netfilter = e.errno
time.sleep(2)
return {"uid_map": open("/proc/self/uid_map").read().split(), "uid": os.getuid(),
        "seccomp": status.get("Seccomp", "").strip(), "netfilter": netfilter}`
	type seen struct {
		UIDMap    []string `json:"uid_map"`
		UID       int      `json:"uid"`
		Seccomp   string   `json:"seccomp"`
		Netfilter any      `json:"netfilter"`
	}
	var (
		wg  sync.WaitGroup
		got [2]seen
		res [2]*engine.Outcome
	)
	for i, owner := range []string{"tenant-alpha", "tenant-beta"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = r.Run(context.Background(), engine.Execution{Program: program, Owner: owner,
				Terms: engine.Terms{Isolation: engine.LevelIsolated, Network: engine.NetworkNone}})
		}()
	}
	wg.Wait()
	for i := range res {
		wantValue(t, res[i], &got[i])
		g := got[i]
		if len(g.UIDMap) != 3 || g.UIDMap[0] != "0" || g.UIDMap[2] != "65536" {
			t.Fatalf("execution %d: uid_map %q, want the container's ids 0-65535 mapped to a block of their own", i, g.UIDMap)
		}
		if g.Seccomp != "2" || g.Netfilter != float64(13) {
			t.Errorf("execution %d: seccomp mode %q, a netfilter socket %v; want the policy's filter (mode 2, EACCES)", i, g.Seccomp, g.Netfilter)
		}
		if res[i].Guarantees.Get(engine.DimProcessCount) != engine.Enforced {
			t.Errorf("execution %d: process_count %s", i, res[i].Guarantees.Get(engine.DimProcessCount))
		}
	}
	if got[0].UIDMap[1] == got[1].UIDMap[1] {
		t.Errorf("two concurrent executions share the host ids from %s", got[0].UIDMap[1])
	}
}
