//go:build linux

package namespaces_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/namespaces"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/spawned"
	"github.com/mcp-sandbox/mcp-sandbox/engine/sandboxtest"
	"github.com/mcp-sandbox/mcp-sandbox/engine/wire"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/launch"
	"github.com/mcp-sandbox/mcp-sandbox/internal/owner"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
	"github.com/mcp-sandbox/mcp-sandbox/internal/userns"
	"github.com/mcp-sandbox/mcp-sandbox/toolcall"
)

// templateRunner is a Runner whose warm pools fork their children from a template. A warm
// miss forks too (the pool's template serves it), so every execution here runs in a forked
// child, which each test checks through the result's start block.
func templateRunner(t *testing.T, ceiling engine.Limits, ro engine.RunnerOptions) *engine.Runner {
	t.Helper()
	ro.Warm = engine.WarmPolicy{Min: 1, Max: 2}
	return newRunner(t, ceiling, templateOptions(t), ro)
}

// templateUID is the host uid a test template's uid 0 maps to on a root host: the last of the
// subordinate range templateOptions gives root. Without root it is the user's own uid
// (templateHostUID).
const templateUID = 300000 + 65535

// templateHostUID is the host uid a test template's uid 0 maps to.
func templateHostUID() int {
	if os.Geteuid() != 0 {
		return os.Geteuid()
	}
	return templateUID
}

// templateOptions turns templates on. On a root host root is given a subordinate range in
// files of the test's own (the template's uid 0 maps to its last id, an unprivileged host
// uid), and the init helper is a copy of this test binary that such a uid may execute: the
// build directory go test runs it from is its user's alone. Without root the user's own
// range is used (newuidmap reads /etc/subuid itself): CI runs these as a user with one, and
// requires it (MCP_SANDBOX_REQUIRE=subids); a user without one skips them, as does a kernel
// without the Landlock ABI a forked child needs.
func templateOptions(t testing.TB) namespaces.Options {
	t.Helper()
	abi := launch.LandlockABI()
	gate.Require(t, "landlock", abi >= launch.TemplateLandlockABI,
		"a forked child installs Landlock rules and scopes (ABI "+itoa(launch.TemplateLandlockABI)+"); this kernel has ABI "+itoa(abi))
	if os.Geteuid() != 0 {
		name := ""
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
		s, why := userns.Host{}.Subordinate(name, os.Geteuid())
		gate.Require(t, "subids", s != nil, why)
		return namespaces.Options{Template: true, Options: spawned.Options{InitPath: testkit.WorldExecutable(t)}}
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ranges := filepath.Join(dir, "subids")
	if err := os.WriteFile(ranges, []byte("root:300000:65536\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return namespaces.Options{Template: true, Options: spawned.Options{InitPath: testkit.WorldExecutable(t)},
		Host: userns.Host{SubUID: ranges, SubGID: ranges}}
}

// templateBackend is a namespaces Backend with templates on (templateOptions), closed when
// t ends.
func templateBackend(t *testing.T) *namespaces.Backend {
	t.Helper()
	opts := templateOptions(t)
	ok, why := namespaces.Available(&opts)
	gate.Require(t, "namespaces", ok, why)
	b, err := namespaces.New(t.Context(), &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func wantForked(t *testing.T, r *engine.Outcome) {
	t.Helper()
	if r.Started == nil || r.Started.Kind != engine.StartForked {
		t.Fatalf("start %+v, want forked (failure %+v, stderr %q)", r.Started, r.Failure, r.Stderr)
	}
}

// siblings runs first, which calls the tools ready and then wait, and while it waits runs
// second; both must be forked, from one template. It returns their outcomes.
func siblings(t *testing.T, r *engine.Runner, first, second string) (a, b *engine.Outcome) {
	t.Helper()
	tools := &gateTools{ready: make(chan struct{}), release: make(chan struct{})}
	done := make(chan *engine.Outcome, 1)
	go func() {
		done <- r.Run(context.Background(), engine.Execution{Program: first, Tools: tools, ToolNames: []string{"ready", "wait"},
			Terms: engine.Terms{Network: engine.NetworkNone}})
	}()
	select {
	case <-tools.ready:
	case a = <-done:
		t.Fatalf("the first sibling ended before it was ready: %+v %s", a.Failure, a.Stderr)
	}
	b = r.Run(t.Context(), engine.Execution{Program: second, Terms: engine.Terms{Network: engine.NetworkNone}})
	close(tools.release)
	a = <-done
	wantForked(t, a)
	wantForked(t, b)
	if a.Started.Template != b.Started.Template {
		t.Fatalf("not siblings: templates %s and %s", a.Started.Template, b.Started.Template)
	}
	return a, b
}

// noSubIDs is a Host whose subordinate ranges are empty files of the test's: no user has one.
func noSubIDs(t *testing.T) userns.Host {
	t.Helper()
	empty := filepath.Join(t.TempDir(), "subids")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return userns.Host{SubUID: empty, SubGID: empty}
}

// execsWithoutTemplate checks a Backend of opts that cannot have a template: its TemplateWhy
// names each of why, its mechanisms do not name the template, and a warm pool's child is
// exec'd. It returns the Backend, closed when t ends.
func execsWithoutTemplate(t *testing.T, opts namespaces.Options, why ...string) *namespaces.Backend {
	t.Helper()
	b, err := namespaces.New(t.Context(), &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	for _, w := range why {
		if got := b.TemplateWhy(); !strings.Contains(got, w) {
			t.Errorf("TemplateWhy %q, want it to name %q", got, w)
		}
	}
	if slices.Contains(b.Mechanisms(), "warm-template-fork") {
		t.Errorf("without a template (TemplateWhy %q), the mechanisms name it: %v", b.TemplateWhy(), b.Mechanisms())
	}
	r := newRunner(t, engine.DefaultLimits, opts, engine.RunnerOptions{Warm: engine.WarmPolicy{Min: 1, Max: 2}})
	res := r.Run(t.Context(), engine.Execution{Program: "6*7", Terms: engine.Terms{Network: engine.NetworkNone}})
	if !res.OK() || res.Started == nil || res.Started.Kind != engine.StartExec {
		t.Fatalf("start %+v, failure %+v: want an exec'd child", res.Started, res.Failure)
	}
	return b
}

func TestTemplateForksAChild(t *testing.T) {
	r := templateRunner(t, engine.DefaultLimits, engine.RunnerOptions{})
	res := r.Run(t.Context(), engine.Execution{Program: "print('hi')\n6*7", Terms: engine.Terms{Network: engine.NetworkNone}})
	wantForked(t, res)
	if !res.OK() || string(res.Value) != "42" || res.Stdout != "hi\n" {
		t.Fatalf("value %s stdout %q failure %+v", res.Value, res.Stdout, res.Failure)
	}
	t.Logf("guarantees %v isolation %s start %+v", res.Guarantees, res.Isolation, *res.Started)
}

// forkedOnly is a Sandbox that fails its test when an execution's child was not forked.
type forkedOnly struct {
	*engine.Runner
	t *testing.T
}

func (s forkedOnly) Run(ctx context.Context, ex engine.Execution) *engine.Outcome {
	res := s.Runner.Run(ctx, ex)
	if res.Started != nil && res.Started.Kind != engine.StartForked {
		s.t.Errorf("an execution's child was %s, not forked: %+v", res.Started.Kind, res.Failure)
	}
	return res
}

// TestTemplateContract runs the contract suite, hostile list included, with every child
// forked from a template: concurrent executions with the same terms are siblings of one
// template there ("hostile/concurrent executions" is the sibling case of the suite).
func TestTemplateContract(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Config{
		Level: engine.LevelIsolated,
		New: func(t *testing.T, ceiling engine.Limits) engine.Sandbox {
			opts := templateOptions(t)
			namespaces.ForkAll(&opts)
			r := newRunner(t, ceiling, opts, engine.RunnerOptions{Artifacts: engine.ArtifactPolicy{Collect: true}})
			return forkedOnly{r, t}
		},
	})
}

// gateTools is the tools two sibling executions synchronise through, without any timing: the
// first calls "ready" once it holds what its sibling will look for, and "wait", which returns
// when the test lets it.
type gateTools struct {
	ready, release chan struct{}
}

func (g *gateTools) CallTool(ctx context.Context, name string, _ json.RawMessage) toolcall.Answer {
	switch name {
	case "ready":
		close(g.ready)
	case "wait":
		select {
		case <-g.release:
		case <-ctx.Done():
		}
	}
	return toolcall.Answer{Value: json.RawMessage("null")}
}

func (g *gateTools) ReadHandle(context.Context, string, int, int, string) toolcall.Answer {
	return toolcall.Answer{Kind: "not_found", Message: "no handles here"}
}

func forkAllRunner(t *testing.T) *engine.Runner {
	t.Helper()
	opts := templateOptions(t)
	namespaces.ForkAll(&opts)
	return newRunner(t, engine.DefaultLimits, opts, engine.RunnerOptions{})
}

// TestTemplateSiblingsApart runs two siblings of one template at once: the second sees no
// process of the first (it is its namespace's pid 1, alone in its /proc), cannot connect to
// the abstract socket the first listens on nor make an inet socket in the network namespace
// they share, finds neither the first's workspace nor its /tmp file, and holds no descriptor
// but 0-3 (none of the template's: its control socket, its children's status pipes, the
// paths its Landlock rules were opened from).
func TestTemplateSiblingsApart(t *testing.T) {
	r := forkAllRunner(t)
	name := "mcp-sandbox-sibling-" + itoa(os.Getpid())
	first := `import os, socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0" + ` + strconv.Quote(name) + `)
s.listen(1)
open("/tmp/` + name + `", "w").write("x")
open("mine", "w").write("x")
await call_tool("ready")
await call_tool("wait")
s.setblocking(False)
try:
    s.accept()
    reached = True
except BlockingIOError:
    reached = False
{"reached": reached, "cwd": os.getcwd()}`
	second := `import os, socket
res = {"pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()), "me": os.getpid()}
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    c.connect("\0" + ` + strconv.Quote(name) + `)
    res["connected"] = True
except OSError as e:
    res["connected"] = False
c.close()
try:
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).bind(("127.0.0.1", 0))
    res["inet"] = True
except OSError:
    res["inet"] = False
res["tmp"] = os.listdir("/tmp")
res["workspaces"] = os.listdir("..")
def _open(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False
res["fds"] = [fd for fd in range(4, 1024) if _open(fd)]
res`
	a, b := siblings(t, r, first, second)
	if !a.OK() || !b.OK() {
		t.Fatalf("first %+v, second %+v (%s)", a.Failure, b.Failure, b.Stderr)
	}
	var got struct {
		Pids       []int    `json:"pids"`
		Me         int      `json:"me"`
		Connected  bool     `json:"connected"`
		Inet       bool     `json:"inet"`
		Tmp        []string `json:"tmp"`
		Workspaces []string `json:"workspaces"`
		FDs        []int    `json:"fds"`
	}
	if err := json.Unmarshal(b.Value, &got); err != nil {
		t.Fatal(err)
	}
	// Siblings share the template's network namespace: what keeps them apart there is the
	// seccomp program (no socket but AF_UNIX) and Landlock's abstract-socket scope.
	if !slices.Equal(got.Pids, []int{1}) || got.Me != 1 || got.Connected || got.Inet || len(got.Tmp) != 0 || len(got.Workspaces) != 1 ||
		len(got.FDs) != 0 {
		t.Errorf("the second sibling reached the first: %+v", got)
	}
	var av map[string]any
	if err := json.Unmarshal(a.Value, &av); err != nil || av["reached"] != false {
		t.Errorf("the first sibling was reached: %s", a.Value)
	}
}

// TestTemplateNoStateBetweenSiblings runs two children of one template in turn: what the
// first sets in a module, the builtins or a preloaded module is not in the second, and
// random draws differ.
func TestTemplateNoStateBetweenSiblings(t *testing.T) {
	r := forkAllRunner(t)
	set := `import builtins, sys, asyncio, random
builtins.LEFT_BEHIND = 1
asyncio.LEFT_BEHIND = 1
sys.modules["left_behind"] = sys
random.random()`
	check := `import builtins, sys, asyncio, random
[hasattr(builtins, "LEFT_BEHIND"), hasattr(asyncio, "LEFT_BEHIND"), "left_behind" in sys.modules, random.random()]`
	a := r.Run(t.Context(), engine.Execution{Program: set, Terms: engine.Terms{Network: engine.NetworkNone}})
	b := r.Run(t.Context(), engine.Execution{Program: check, Terms: engine.Terms{Network: engine.NetworkNone}})
	wantForked(t, a)
	wantForked(t, b)
	if a.Started.Template != b.Started.Template || !a.OK() || !b.OK() {
		t.Fatalf("templates %s and %s; failures %+v %+v", a.Started.Template, b.Started.Template, a.Failure, b.Failure)
	}
	var first float64
	var got []any
	if json.Unmarshal(a.Value, &first) != nil || json.Unmarshal(b.Value, &got) != nil || len(got) != 4 {
		t.Fatalf("values %s and %s", a.Value, b.Value)
	}
	if got[0] != false || got[1] != false || got[2] != false {
		t.Errorf("the second child saw the first one's state: %v", got)
	}
	if got[3] == first {
		t.Errorf("both children drew %v first from random", first)
	}
}

// TestTemplateOutlivesAForkBomb runs a fork bomb in one forked child; the template then
// forks the next child as before, and that child completes. Hostile: only in the tests' own
// pid namespace.
func TestTemplateOutlivesAForkBomb(t *testing.T) {
	gate.Hostile(t)
	r := forkAllRunner(t)
	// The same terms for both, so that both fork from one template: a wall clock the bomb
	// ends at, and that the next program meets even on a loaded machine.
	lim := engine.Limits{WallSeconds: 3 * gate.Scale(), ProcessCount: 16}
	bomb := r.Run(t.Context(), engine.Execution{Program: "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
		Terms: engine.Terms{Network: engine.NetworkNone, Limits: lim}})
	wantForked(t, bomb)
	if bomb.OK() {
		t.Fatalf("the fork bomb completed")
	}
	next := r.Run(t.Context(), engine.Execution{Program: "6*7", Terms: engine.Terms{Network: engine.NetworkNone, Limits: lim}})
	wantForked(t, next)
	if !next.OK() || string(next.Value) != "42" || next.Started.Template != bomb.Started.Template {
		t.Fatalf("after the bomb: %s %+v, template %s (the bomb's %s)", next.Value, next.Failure, next.Started.Template, bomb.Started.Template)
	}
}

// TestTemplateUnprivilegedOnTheHost looks at a forked child and at the template from the host
// while the child waits for its program: the child runs as its run_as uid with no
// capability; the template runs as the unprivileged host uid the template's user namespace
// maps its uid 0 to, and its bounding set holds only the capabilities it keeps
// (launch.TemplateCaps).
func TestTemplateUnprivilegedOnTheHost(t *testing.T) {
	b := templateBackend(t)
	if !slices.Contains(b.Mechanisms(), "warm-template-fork") {
		t.Errorf("mechanisms %v do not name the template", b.Mechanisms())
	}
	argv := []string{"-I", "-c", engine.BootstrapSource, "/nonexistent", "0", "0", "1000000", "cold"}
	c, err := b.Start(t.Context(), engine.LaunchSpec{Terms: engine.Terms{Limits: engine.DefaultLimits, Network: engine.NetworkNone,
		Isolation: engine.LevelIsolated}, Argv: argv, Stdout: io.Discard, Stderr: io.Discard, Pooled: true, Owner: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Facts().Forked == nil {
		t.Fatal("the child was exec'd")
	}
	if _, err := wire.NewReader(c.Channel(), 0).ReadFrame(wire.TypeHello); err != nil {
		t.Fatalf("hello: %v", err)
	}
	// Workspace is /proc/<the child's host pid>/root/...
	ws := strings.Split(c.Workspace(), "/")
	if len(ws) < 3 || ws[1] != "proc" {
		t.Fatalf("workspace %q", c.Workspace())
	}
	// The child, its namespace's pid 1, has dropped to its run_as identity: no capability.
	child := procStatus(t, ws[2])
	if f := strings.Fields(child["Uid"]); len(f) != 4 || f[0] == "0" || f[0] == itoa(templateHostUID()) || slices.ContainsFunc(f, func(u string) bool { return u != f[0] }) {
		t.Errorf("the child (pid %s) runs as uids %q on the host, want one run_as uid", ws[2], child["Uid"])
	}
	if child["CapEff"] != "0000000000000000" || child["CapPrm"] != "0000000000000000" {
		t.Errorf("the child (pid %s) holds capabilities: effective %s, permitted %s", ws[2], child["CapEff"], child["CapPrm"])
	}
	var want uint64
	for _, cp := range launch.TemplateCaps {
		want |= 1 << cp
	}
	pid := child["PPid"]
	st := procStatus(t, pid)
	if f := strings.Fields(st["Uid"]); len(f) != 4 || slices.ContainsFunc(f, func(u string) bool { return u != itoa(templateHostUID()) }) {
		t.Errorf("the template (pid %s) runs as uids %q on the host, want %d", pid, st["Uid"], templateHostUID())
	}
	if bnd, err := strconv.ParseUint(st["CapBnd"], 16, 64); err != nil || bnd != want {
		t.Errorf("the template (pid %s) has the bounding set %s, want %x", pid, st["CapBnd"], want)
	}
}

// procStatus reads /proc/pid/status into its fields, trimmed.
func procStatus(t *testing.T, pid string) map[string]string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

// TestTemplateNeedsAnUnprivilegedUID: where root has no subordinate range for the template's
// uid 0, warm children are exec'd, and the result says so.
func TestTemplateNeedsAnUnprivilegedUID(t *testing.T) {
	opts := templateOptions(t)
	opts.Host = noSubIDs(t)
	execsWithoutTemplate(t, opts)
}

// TestTemplateNeedsAReachableHelper: the template's helper is exec'd as its unprivileged
// host uid, so an init helper in a directory of root's alone (a build cache, a home) cannot
// be one: the Backend says why and its warm children are exec'd, without a template tried.
func TestTemplateNeedsAReachableHelper(t *testing.T) {
	gate.AppliesOnly(t, os.Geteuid() == 0, "without root the template's helper runs as the user itself, who can execute it")
	opts := templateOptions(t)
	dir, err := os.MkdirTemp("", "mcp-sandbox-init-") // 0700, in a directory anyone may search
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	exe, err := os.ReadFile(opts.InitPath)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "init"), exe, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	opts.InitPath = filepath.Join(dir, "init")
	b := execsWithoutTemplate(t, opts, "cannot execute the init helper", dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if why := b.TemplateWhy(); why != "" {
		t.Errorf("with the helper reachable, TemplateWhy %q", why)
	}
}

// TestTemplateRetriedLater: after a template failed to start, the Backend execs its pool's
// children for a while (templateRetry) without trying another, so a host where templates
// cannot come up does not pay a failed start for each child. The failure here is arguments
// the template refuses; the next child, with good ones, is exec'd all the same.
func TestTemplateRetriedLater(t *testing.T) {
	b := templateBackend(t)
	terms := engine.Terms{Limits: engine.DefaultLimits, Network: engine.NetworkNone, Isolation: engine.LevelIsolated}
	good := []string{"-I", "-c", engine.BootstrapSource, "/nonexistent", "0", "0", "1000000", "cold"}
	for i, argv := range [][]string{good[:3], good} {
		c, err := b.Start(t.Context(), engine.LaunchSpec{Terms: terms, Argv: argv, Stdout: io.Discard, Stderr: io.Discard, Pooled: true, Owner: "t"})
		if err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		forked := c.Facts().Forked != nil
		c.Close()
		if forked {
			t.Fatalf("start %d was forked: want exec'd children once a template failed to start", i)
		}
	}
	if why := b.TemplateWhy(); why != "" {
		t.Errorf("TemplateWhy %q: the prerequisites are met, only the retry waits", why)
	}
}

// TestTemplateLeavesNothing runs executions on forked children, completed, failed and killed,
// then closes the Runner: no descriptor of the host, no cgroup of this process's, no root mount
// point and no template or child process is left.
func TestTemplateLeavesNothing(t *testing.T) {
	opts := templateOptions(t)
	namespaces.ForkAll(&opts)
	// The template's uid mounts its root there: a directory it may search (t.TempDir's
	// parent is the tests' user's alone).
	base, err := os.MkdirTemp("", "mcp-sandbox-roots-")
	if err == nil {
		err = os.Chmod(base, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	opts.RootBase = base
	ok, why := namespaces.Available(&opts)
	gate.Require(t, "namespaces", ok, why)
	groups := ownCgroups() // owner.Tag holds a lock file from its first call: before counting
	fds := countFDs(t)
	b, err := namespaces.New(t.Context(), &opts)
	r := sandboxtest.Runner(t, b, err, &engine.RunnerOptions{Ceiling: engine.DefaultLimits, Isolation: engine.LevelIsolated})
	for i, program := range []string{"6*7", "raise ValueError('x')", "import time\ntime.sleep(600)", "open('f', 'w').write('x')"} {
		var lim engine.Limits
		if i == 2 {
			lim.WallSeconds = 1 // the sleeper is killed at its wall clock
		}
		for j := 0; j < 3; j++ {
			res := r.Run(t.Context(), engine.Execution{Program: program, Owner: "t" + itoa(j%2),
				Terms: engine.Terms{Network: engine.NetworkNone, Limits: lim}})
			wantForked(t, res)
			if i == 0 && !res.OK() {
				t.Fatalf("6*7: %+v", res.Failure)
			}
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(opts.RootBase); len(left) != 0 {
		t.Errorf("root mount points left: %v", left)
	}
	if got := countFDs(t); got > fds {
		es, _ := os.ReadDir("/proc/self/fd")
		var links []string
		for _, e := range es {
			l, _ := os.Readlink("/proc/self/fd/" + e.Name())
			links = append(links, e.Name()+"="+l)
		}
		t.Errorf("%d descriptors open after, %d before: %v", got, fds, links)
	}
	if got := ownCgroups(); len(got) > len(groups) {
		t.Errorf("cgroups left: %v (before: %v)", got, groups)
	}
	for _, pid := range gatePids() {
		if cmd, _ := os.ReadFile("/proc/" + pid + "/cmdline"); strings.Contains(string(cmd), "# mcp-sandbox template") {
			t.Errorf("a template's process is left: pid %s", pid)
		}
	}
}

func countFDs(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// ownCgroups lists this process's execution cgroups (named with its owner tag) in every
// hierarchy of the machine.
func ownCgroups() []string {
	var got []string
	tag := "-" + owner.Tag() + "-"
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/mcp-sandbox/*")
	more, _ := filepath.Glob("/sys/fs/cgroup/mcp-sandbox/*")
	for _, d := range append(dirs, more...) {
		if owner.Tag() != "" && strings.Contains(filepath.Base(d), tag) {
			got = append(got, d)
		}
	}
	return got
}

// gatePids lists the processes this test binary started (gate.Ours).
func gatePids() []string {
	ours := gate.Ours()
	var pids []string
	es, _ := os.ReadDir("/proc")
	for _, e := range es {
		if pid, err := strconv.Atoi(e.Name()); err == nil && ours(pid) && pid != os.Getpid() {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// TestTemplateRecycled: a template that has forked its share is succeeded by a new one,
// started beside it, while executions go on forking from the old one; the next execution
// after the successor is ready forks from it.
func TestTemplateRecycled(t *testing.T) {
	opts := templateOptions(t)
	namespaces.ForkAll(&opts)
	namespaces.RecycleAfter(&opts, 2)
	ok, why := namespaces.Available(&opts)
	gate.Require(t, "namespaces", ok, why)
	b, err := namespaces.New(t.Context(), &opts)
	r := sandboxtest.Runner(t, b, err, &engine.RunnerOptions{Ceiling: engine.DefaultLimits, Isolation: engine.LevelIsolated})
	run := func() *engine.Outcome {
		res := r.Run(t.Context(), engine.Execution{Program: "6*7", Terms: engine.Terms{Network: engine.NetworkNone}})
		wantForked(t, res)
		if !res.OK() {
			t.Fatalf("6*7: %+v", res.Failure)
		}
		return res
	}
	first := run().Started.Template
	for i := 0; i < 2; i++ { // the third start finds the template due: its successor starts
		if got := run().Started.Template; got != first {
			t.Fatalf("execution %d forked from %s before the first template was due", i+2, got)
		}
	}
	namespaces.WaitSuccessors(b)
	if next := run(); next.Started.Template == first || *next.Started.TemplateChildren != 1 {
		t.Fatalf("after the successor was ready: template %s child %d (the first was %s)", next.Started.Template,
			*next.Started.TemplateChildren, first)
	}
}
