//go:build linux

package namespaces_test

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/namespaces"
	"github.com/mcp-sandbox/mcp-sandbox/engine/wire"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// landlockProbe reads a file and writes one in dir, which the child's mount namespace shows
// (writable, and the file readable by anyone): what each attempt met, and whether the file
// was there to be seen (stat is no access Landlock handles).
func landlockProbe(dir string) string {
	return `import os
D = ` + strconv.Quote(dir) + `
res = {"visible": os.path.exists(D + "/secret")}
try:
    res["read"] = open(D + "/secret").read()
except OSError as e:
    res["read"] = "errno %d" % e.errno
try:
    with open(D + "/written", "w") as f:
        f.write("x")
    res["write"] = "ok"
except OSError as e:
    res["write"] = "errno %d" % e.errno
res`
}

// TestTemplateLandlockBeyondTheMounts: a forked child installs the Landlock rules Go
// assembled, so a directory its mount namespace wrongly shows it (bound writable into the
// template's root, a file in it readable by anyone) is still out of reach: the read and the
// write fail with EACCES. The same child without the ruleset reads and writes there, which
// shows the refusal is Landlock's, not the mount's or the file's.
func TestTemplateLandlockBeyondTheMounts(t *testing.T) {
	// Not under /tmp, which each child mounts a tmpfs of its own on.
	dir, err := os.MkdirTemp("/var/tmp", "mcp-sandbox-exposed-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(landlock bool) (map[string]any, *engine.Outcome) {
		opts := templateOptions(t)
		namespaces.ForkAll(&opts)
		namespaces.Expose(&opts, dir)
		if !landlock {
			namespaces.NoLandlock(&opts)
		}
		r := newRunner(t, engine.DefaultLimits, opts, engine.RunnerOptions{})
		res := r.Run(t.Context(), engine.Execution{Program: landlockProbe(dir), Terms: engine.Terms{Network: engine.NetworkNone}})
		wantForked(t, res)
		if !res.OK() {
			t.Fatalf("landlock %v: %+v %s", landlock, res.Failure, res.Stderr)
		}
		var got map[string]any
		if err := json.Unmarshal(res.Value, &got); err != nil {
			t.Fatal(err)
		}
		return got, res
	}
	without, _ := run(false)
	if without["visible"] != true || without["read"] != "secret" || without["write"] != "ok" {
		t.Fatalf("without Landlock the exposed directory is not reachable, so this test proves nothing: %v", without)
	}
	if err := os.Remove(filepath.Join(dir, "written")); err != nil {
		t.Fatal(err)
	}
	with, res := run(true)
	if with["visible"] != true || with["read"] != "errno 13" || with["write"] != "errno 13" {
		t.Errorf("under the child's Landlock rules: %v, want the file visible and both accesses EACCES", with)
	}
	if _, err := os.Stat(filepath.Join(dir, "written")); err == nil {
		t.Errorf("the forked child wrote outside its workspace")
	}
	t.Logf("guarantees %v", res.Guarantees)
}

// TestTemplateLandlockWithheldRefused: a forked child whose facts claim Landlock but whose
// ruleset did not go in (withheld on purpose) is refused before any program byte, and the
// refusal names Landlock: its probe finds / readable, which a domain would refuse. The
// program would write a file in a directory its mount namespace shows; the same program in a
// child that claims no Landlock writes it, so its absence means the program never ran.
func TestTemplateLandlockWithheldRefused(t *testing.T) {
	dir, err := os.MkdirTemp("/var/tmp", "mcp-sandbox-exposed-") // not under a child's own /tmp
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	mark := filepath.Join(dir, "ran")
	program := "open(" + strconv.Quote(mark) + ", 'w').write('x')\n6*7"
	run := func(opt func(*namespaces.Options)) *engine.Outcome {
		opts := templateOptions(t)
		namespaces.ForkAll(&opts)
		namespaces.Expose(&opts, dir)
		opt(&opts)
		r := newRunner(t, engine.DefaultLimits, opts, engine.RunnerOptions{})
		return r.Run(t.Context(), engine.Execution{Program: program, Terms: engine.Terms{Network: engine.NetworkNone}})
	}
	res := run(namespaces.WithholdLandlock)
	wantForked(t, res)
	if res.OK() || res.Failure == nil {
		t.Fatalf("a forked child without its Landlock ruleset ran: value %s", res.Value)
	}
	if res.Failure.Kind != failure.IsolationUnavailable || res.Failure.Executed ||
		!strings.Contains(res.Failure.Message, "no Landlock domain") {
		t.Errorf("failure %+v, want isolation_unavailable, not executed, naming the missing Landlock domain", res.Failure)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatalf("the refused child's program ran: it wrote %s", mark)
	}
	t.Logf("refused: %s", res.Failure.Message)
	res = run(namespaces.NoLandlock)
	wantForked(t, res)
	if !res.OK() {
		t.Fatalf("a forked child that claims no Landlock: %+v %s", res.Failure, res.Stderr)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("the same program in a child without Landlock did not write %s, so the refusal above proves nothing: %v", mark, err)
	}
}

// TestTemplateNeedsLandlockScopes: where the kernel's Landlock ABI lacks scopes (below 6), no
// template is used: warm children are exec'd, and TemplateWhy says why.
func TestTemplateNeedsLandlockScopes(t *testing.T) {
	opts := templateOptions(t)
	namespaces.PretendLandlockABI(&opts, 5)
	ok, why := namespaces.Available(&opts)
	gate.Require(t, "namespaces", ok, why)
	execsWithoutTemplate(t, opts, "Landlock ABI is 5")
}

// TestTemplateNeedsRootUngranted: where a child's Landlock ruleset would grant / itself (an
// interpreter installed there), its probe could not show the domain and every forked child
// would be refused; no template is used, and TemplateWhy says why.
func TestTemplateNeedsRootUngranted(t *testing.T) {
	opts := templateOptions(t)
	namespaces.GrantRead(&opts, "/")
	ok, why := namespaces.Available(&opts)
	gate.Require(t, "namespaces", ok, why)
	b, err := namespaces.New(t.Context(), &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if why := b.TemplateWhy(); !strings.Contains(why, "include /") {
		t.Errorf("TemplateWhy %q, want it to name / among the granted paths", why)
	}
	if slices.Contains(b.Mechanisms(), "warm-template-fork") {
		t.Errorf("with / granted, the mechanisms name the template: %v", b.Mechanisms())
	}
}

// TestTemplateNeedsASubordinateRange: a user without root and without a subordinate range
// gets no template (a forked child would share the template's user namespace and uid, and
// nothing would bound its processes); its warm children are exec'd, and TemplateWhy says why.
func TestTemplateNeedsASubordinateRange(t *testing.T) {
	needNonRoot(t)
	execsWithoutTemplate(t, namespaces.Options{Template: true, Host: noSubIDs(t)}, "subordinate range", "process_count")
}

// TestTemplateSiblingsUIDsOfTheirOwn runs two siblings of one template at once: each runs as
// a uid no other holds (on a root host a run_as range, without root the block of the user's
// subordinate range), that uid is an unprivileged host uid (not the server's), and
// process_count is enforced by RLIMIT_NPROC in the shared user namespace for that reason.
func TestTemplateSiblingsUIDsOfTheirOwn(t *testing.T) {
	opts := templateOptions(t)
	namespaces.ForkAll(&opts)
	if os.Geteuid() == 0 {
		opts.RunAs = "70000-70063" // below root's test range (templateOptions)
	}
	r := newRunner(t, engine.DefaultLimits, opts, engine.RunnerOptions{})
	who := `import os
uid = os.getuid()
host = None
for line in open("/proc/self/uid_map"):
    inside, outside, n = map(int, line.split())
    if inside <= uid < inside + n:
        host = outside + uid - inside
[uid, host]`
	a, b := siblings(t, r, "await call_tool('ready')\nawait call_tool('wait')\n"+who, who)
	if !a.OK() || !b.OK() {
		t.Fatalf("failures %+v %+v (%s)", a.Failure, b.Failure, b.Stderr)
	}
	var ua, ub []int
	if json.Unmarshal(a.Value, &ua) != nil || json.Unmarshal(b.Value, &ub) != nil || len(ua) != 2 || len(ub) != 2 {
		t.Fatalf("values %s and %s", a.Value, b.Value)
	}
	if ua[0] == ub[0] || ua[1] == ub[1] {
		t.Errorf("two siblings ran as one uid: %v and %v", ua, ub)
	}
	for _, u := range [][]int{ua, ub} {
		if u[1] == os.Geteuid() || u[1] == 0 {
			t.Errorf("a sibling runs as host uid %d, the server's or root's", u[1])
		}
	}
	for _, res := range []*engine.Outcome{a, b} {
		if g := res.Guarantees[engine.DimProcessCount]; g != engine.Enforced {
			t.Errorf("process_count %s, want enforced (a uid of its own)", g)
		}
	}
}

// BenchmarkTemplateChild measures forked children from the request to their hello and their
// close, with and without the Landlock ruleset they install, in turn in one loop (one of each
// per iteration, so load changes reach both alike): what a child's Landlock costs. The
// figures are the medians of each, in ms/child; ns/op is the pair.
func BenchmarkTemplateChild(b *testing.B) {
	backend := func(landlock bool) *namespaces.Backend {
		opts := templateOptions(b)
		if !landlock {
			namespaces.NoLandlock(&opts)
		}
		ok, why := namespaces.Available(&opts)
		gate.Require(b, "namespaces", ok, why)
		be, err := namespaces.New(b.Context(), &opts)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { be.Close() })
		return be
	}
	argv := []string{"-I", "-c", engine.BootstrapSource, "/nonexistent", "0", "0", "1000000", "cold"}
	spec := engine.LaunchSpec{Terms: engine.Terms{Limits: engine.DefaultLimits, Network: engine.NetworkNone,
		Isolation: engine.LevelIsolated}, Argv: argv, Stdout: io.Discard, Stderr: io.Discard, Pooled: true, Owner: "b"}
	child := func(be *namespaces.Backend) time.Duration {
		start := time.Now()
		c, err := be.Start(b.Context(), spec)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		if c.Facts().Forked == nil {
			b.Fatal("the child was exec'd")
		}
		if _, err := wire.NewReader(c.Channel(), 0).ReadFrame(wire.TypeHello); err != nil {
			b.Fatalf("hello: %v", err)
		}
		return time.Since(start)
	}
	with, without := backend(true), backend(false)
	child(with) // the templates' starts
	child(without)
	var dw, dn []time.Duration
	for b.Loop() {
		dw, dn = append(dw, child(with)), append(dn, child(without))
	}
	med := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2]) / float64(time.Millisecond)
	}
	b.ReportMetric(med(dw), "ms/child-landlock")
	b.ReportMetric(med(dn), "ms/child-without-landlock")
}
