//go:build linux

package benchmarks

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/namespaces"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/spawned"
	"github.com/mcp-sandbox/mcp-sandbox/engine/wire"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
	"github.com/mcp-sandbox/mcp-sandbox/internal/userns"
)

// zygote is the floor of a forkserver: an interpreter started once, with what the bootstrap
// loads already loaded, that forks a child per request; the child takes fresh namespaces
// (mount, pid, net, ipc, uts: it forks again to enter the pid namespace), mounts a private
// tmpfs for its workspace, drops to the sandbox identity, sets no_new_privs and says hello.
// It leaves out what a real one would still need (a root built and pivoted into, a cgroup,
// rlimits, seccomp, the bootstrap's probe), so it is a lower bound on a forkserver's cost.
const zygote = `import os, sys, ctypes
import _json, _socket, resource, asyncio, traceback
libc = ctypes.CDLL(None, use_errno=True)
NS = 0x00020000 | 0x04000000 | 0x08000000 | 0x20000000 | 0x40000000
MS_REC, MS_PRIVATE = 16384, 1 << 18
ctl = 3
while True:
    if not os.read(ctl, 1):
        break
    pid = os.fork()
    if pid == 0:
        if libc.unshare(NS) != 0:
            os._exit(1)
        inner = os.fork()
        if inner == 0:
            libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None)
            if libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, b"size=64m") != 0:
                os._exit(2)
            os.chdir("/tmp")
            os.setgroups([65534]); os.setresgid(65534, 65534, 65534); os.setresuid(65534, 65534, 65534)
            libc.prctl(38, 1, 0, 0, 0)
            os.write(ctl, b"h")
            os._exit(0)
        os.waitpid(inner, 0)
        os._exit(0)
    os.waitpid(pid, 0)
`

// TestReportForkserver measures what the template saves: the time from asking for a child to
// its hello, for the namespaces backend's exec'd child (a fresh interpreter through the init
// helper, confined in full), for its child forked from a template (warm.start: template,
// confined in full as well), and for the zygote's floor above, each as a ratio to a bare
// interpreter start and to the exec'd child, taken in turn in one loop. docs/design.md §4.4
// has the figures.
func TestReportForkserver(t *testing.T) {
	gate.Require(t, "root", os.Geteuid() == 0, "the zygote makes namespaces and mounts as root")
	ok, why := namespaces.Available(&namespaces.Options{})
	gate.Require(t, "namespaces", ok, why)
	ctx := context.Background()
	b, err := namespaces.New(ctx, &namespaces.Options{})
	if err != nil {
		t.Fatal(err)
	}
	terms := engine.Terms{Limits: engine.DefaultLimits, Network: engine.NetworkNone, Isolation: engine.LevelIsolated}
	argv := []string{"-I", "-c", engine.BootstrapSource, "/nonexistent", "0", "0", "1000000", "cold"}
	// The template (warm.start: template): the same backend forking a warm pool's child.
	tb, err := namespaces.New(ctx, templateOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tb.Close() })
	startToHello := func(b *namespaces.Backend, pooled bool) time.Duration {
		start := time.Now()
		c, err := b.Start(ctx, engine.LaunchSpec{Terms: terms, Argv: argv, Stdout: io.Discard, Stderr: io.Discard, Pooled: pooled, Owner: "bench"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wire.NewReader(c.Channel(), 0).ReadFrame(wire.TypeHello); err != nil {
			t.Fatalf("hello: %v", err)
		}
		d := time.Since(start)
		if got := c.Facts().Forked != nil; got != pooled {
			t.Fatalf("the child was forked: %v, want %v", got, pooled)
		}
		c.Kill()
		c.Close()
		return d
	}

	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	host, child := os.NewFile(uintptr(fds[0]), "zygote-host"), os.NewFile(uintptr(fds[1]), "zygote-child")
	z := exec.Command("/usr/bin/python3", "-I", "-c", zygote)
	z.ExtraFiles = []*os.File{child}
	err = z.Start()
	gate.Require(t, "python", err == nil, fmt.Sprintf("no /usr/bin/python3 for the zygote: %v", err))
	child.Close()
	t.Cleanup(func() { host.Close(); _ = z.Wait() })
	fork := func() time.Duration {
		start := time.Now()
		if _, err := host.Write([]byte("g")); err != nil {
			t.Fatal(err)
		}
		var h [1]byte
		if _, err := io.ReadFull(host, h[:]); err != nil {
			t.Fatalf("the zygote's child did not say hello: %v", err)
		}
		return time.Since(start)
	}

	n := 10
	if *report {
		n = 60
	}
	var cold, tpl, forked, py []time.Duration
	for i := 0; i < n+2; i++ {
		c, tf, f, p := startToHello(b, false), startToHello(tb, true), fork(), bareStart(t)
		if i >= 2 {
			cold, tpl, forked, py = append(cold, c), append(tpl, tf), append(forked, f), append(py, p)
		}
	}
	mc, mt, mf, mp := median(cold), median(tpl), median(forked), median(py)
	row := func(name string, d time.Duration) string {
		return fmt.Sprintf("  %-62s %9s  %5.2fx bare  %5.2fx exec'd\n", name, d.Round(10*time.Microsecond), float64(d)/float64(mp), float64(d)/float64(mc))
	}
	out := fmt.Sprintf("from asking for a child to its hello, median of %d, in turn in one loop (load average %s)\n", n, loadAverage()) +
		row("bare /usr/bin/python3 -I -c pass (baseline)", mp) +
		row("namespaces backend, exec'd: interpreter through the init helper", mc) +
		row("namespaces backend, forked from its template (warm.start)", mt) +
		row("forkserver floor: fork, unshare, fork, tmpfs, drop, hello", mf) +
		"  (pid " + strconv.Itoa(z.Process.Pid) + " was the zygote)\n"
	t.Log(out)
	fmt.Fprintln(os.Stderr, out)
}

// bareStart times one bare interpreter start, the baseline both reports compare against.
func bareStart(t *testing.T) time.Duration {
	start := time.Now()
	if out, err := exec.Command("/usr/bin/python3", "-I", "-c", "pass").CombinedOutput(); err != nil {
		t.Fatalf("python3: %v %s", err, out)
	}
	return time.Since(start)
}

// templateOptions turns the namespaces backend's templates on. On a root host a template's
// uid 0 maps to root's last subordinate uid, given here in a file of the test's own, and that
// uid must be able to execute the init helper (testkit.WorldExecutable). Without root the
// children take uids of the user's own subordinate range (newuidmap reads /etc/subuid).
func templateOptions(t *testing.T) *namespaces.Options {
	t.Helper()
	if os.Geteuid() != 0 {
		name := ""
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
		s, why := userns.Host{}.Subordinate(name, os.Geteuid())
		gate.Require(t, "subids", s != nil, why)
		return &namespaces.Options{Template: true}
	}
	dir := t.TempDir()
	ranges := filepath.Join(dir, "subids")
	err := os.Chmod(dir, 0o755)
	if err == nil {
		err = os.WriteFile(ranges, []byte("root:300000:65536\n"), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	return &namespaces.Options{Template: true, Options: spawned.Options{InitPath: testkit.WorldExecutable(t)},
		Host: userns.Host{SubUID: ranges, SubGID: ranges}}
}

// TestReportWarmTemplate measures back-to-back executions of 6*7 through a Runner with warm
// pools, its children exec'd or forked from a template (warm.start), in turn in one loop: the
// engine's side of the stdio latency target (median 5 ms, p99 20 ms), without the MCP
// layer, beside a bare interpreter start measured in the same loop.
func TestReportWarmTemplate(t *testing.T) {
	ok, why := namespaces.Available(&namespaces.Options{})
	gate.Require(t, "namespaces", ok, why)
	ctx := context.Background()
	runner := func(o *namespaces.Options) *engine.Runner {
		b, err := namespaces.New(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		r, err := engine.NewRunner(b, &engine.RunnerOptions{Ceiling: engine.DefaultLimits, Isolation: engine.LevelIsolated,
			Warm: engine.WarmPolicy{Min: 1, Max: 4}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	execd, forked := runner(&namespaces.Options{}), runner(templateOptions(t))
	run := func(r *engine.Runner, kind string) time.Duration {
		start := time.Now()
		res := r.Run(ctx, engine.Execution{Program: "6*7", Terms: engine.Terms{Network: engine.NetworkNone}})
		d := time.Since(start)
		if !res.OK() || res.Started == nil || res.Started.Kind != kind {
			t.Fatalf("%s: %+v %+v", kind, res.Started, res.Failure)
		}
		return d
	}
	n := 30
	if *report {
		n = 300
	}
	var ex, fk, py []time.Duration
	for i := 0; i < n+5; i++ {
		e, f, p := run(execd, engine.StartExec), run(forked, engine.StartForked), bareStart(t)
		if i >= 5 {
			ex, fk, py = append(ex, e), append(fk, f), append(py, p)
		}
	}
	mp := median(py)
	row := func(name string, d []time.Duration) string {
		m, p99 := median(d), percentile(d, 99)
		return fmt.Sprintf("  %-44s median %9s (%5.2fx bare)  p99 %9s\n", name, m.Round(10*time.Microsecond),
			float64(m)/float64(mp), p99.Round(10*time.Microsecond))
	}
	out := fmt.Sprintf("back-to-back Run of 6*7, warm pools min 1 max 4, %d each, in turn in one loop (load average %s)\n", n, loadAverage()) +
		row("bare /usr/bin/python3 -I -c pass (baseline)", py) +
		row("namespaces, warm children exec'd", ex) +
		row("namespaces, warm children forked (template)", fk)
	t.Log(out)
	fmt.Fprintln(os.Stderr, out)
}
