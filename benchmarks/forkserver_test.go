//go:build linux

package benchmarks

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/namespaces"
	"github.com/mcp-sandbox/mcp-sandbox/engine/wire"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
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

// TestReportForkserver measures what a forkserver would save: the time from asking for a
// child to its hello, for the namespaces backend as it is (a fresh interpreter through the init
// helper, confined in full) beside the zygote's floor above. docs/design.md §4.4 gives the
// verdict.
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
	startToHello := func() time.Duration {
		start := time.Now()
		c, err := b.Start(ctx, engine.LaunchSpec{Terms: terms, Argv: argv, Stdout: io.Discard, Stderr: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wire.NewReader(c.Channel(), 0).ReadFrame(wire.TypeHello); err != nil {
			t.Fatalf("hello: %v", err)
		}
		d := time.Since(start)
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
	var cold, forked []time.Duration
	for i := 0; i < n+2; i++ {
		c, f := startToHello(), fork()
		if i >= 2 {
			cold, forked = append(cold, c), append(forked, f)
		}
	}
	mc, mf := median(cold), median(forked)
	out := fmt.Sprintf("from asking for a child to its hello, median of %d (load average %s)\n", n, loadAverage()) +
		fmt.Sprintf("  %-62s %9s\n", "namespaces backend: interpreter through the init helper", mc.Round(10*time.Microsecond)) +
		fmt.Sprintf("  %-62s %9s  %5.1fx faster\n", "forkserver floor: fork, unshare, fork, tmpfs, drop, hello", mf.Round(10*time.Microsecond), float64(mc)/float64(mf)) +
		"  (pid " + strconv.Itoa(z.Process.Pid) + " was the zygote)\n"
	t.Log(out)
	fmt.Fprintln(os.Stderr, out)
}
