//go:build linux

package namespaces_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/namespaces"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/process"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/spawned"
	"github.com/mcp-sandbox/mcp-sandbox/failure"
	"github.com/mcp-sandbox/mcp-sandbox/internal/cgroup"
	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

func run(t *testing.T, r *engine.Runner, program string, lim engine.Limits) *engine.Outcome {
	t.Helper()
	return r.Run(context.Background(), engine.Execution{Program: program,
		Terms: engine.Terms{Limits: lim, Isolation: engine.LevelIsolated, Network: engine.NetworkNone}})
}

func ok(t *testing.T, r *engine.Outcome) {
	t.Helper()
	if r.Failure != nil {
		t.Fatalf("failure %s: %s\n%s\nstderr: %s", r.Failure.Kind, r.Failure.Message, r.Failure.Traceback, r.Stderr)
	}
}

// Must show 2: host files are out of reach, and the grade says so.
func TestHostFilesOutOfReach(t *testing.T) {
	dataDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dataDir, "ledger.db"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dataDir, 0o755)
	home, _ := os.UserHomeDir()
	r := newRunner(t, engine.DefaultLimits, namespaces.Options{}, engine.RunnerOptions{StateDir: dataDir})
	prog := fmt.Sprintf(`import os
out = {}
for p in %s:
    try:
        if os.path.isdir(p):
            os.listdir(p)
        else:
            open(p, 'rb').read(1)
        out[p] = "readable"
    except FileNotFoundError:
        out[p] = "absent"
    except OSError as e:
        out[p] = "unreadable"
out`, pyList("/etc/shadow", home, dataDir, filepath.Join(dataDir, "ledger.db"), "/var", "/srv", "/opt", "/etc/ssh"))
	res := run(t, r, prog, engine.Limits{})
	ok(t, res)
	for p, v := range valueMap(t, res) {
		if v == "readable" {
			t.Errorf("%s is readable inside the sandbox", p)
		}
	}
	if g := res.Guarantees.Get(engine.DimFilesystem); g != engine.Enforced {
		t.Errorf("filesystem graded %s, want enforced", g)
	}
	if res.Isolation != engine.LevelIsolated {
		t.Errorf("isolation %s, want isolated", res.Isolation)
	}
}

// Must show 2: /proc shows the program's own processes only.
func TestProcShowsOnlyOwnProcesses(t *testing.T) {
	r := newRunner(t, engine.DefaultLimits, namespaces.Options{}, engine.RunnerOptions{})
	res := run(t, r, "import os\n[os.getpid(), sorted(int(n) for n in os.listdir('/proc') if n.isdigit())]", engine.Limits{})
	ok(t, res)
	var got []any
	if err := jsonUnmarshal(res.Value, &got); err != nil {
		t.Fatal(err)
	}
	pids := got[1].([]any)
	if len(pids) > 2 {
		t.Fatalf("the program sees %d processes in /proc (%v), want only its init and itself", len(pids), pids)
	}
	if g := res.Guarantees.Get(engine.DimProcessTree); g != engine.Enforced {
		t.Errorf("process_tree graded %s", g)
	}
}

// Must show 2: the host's loopback listeners are out of reach, with and without seccomp.
func TestHostLoopbackUnreachable(t *testing.T) {
	for _, opts := range []namespaces.Options{{}, {Options: spawned.Options{Disable: []string{"seccomp"}}}} {
		t.Run(fmt.Sprintf("disable=%v", opts.Disable), func(t *testing.T) {
			var ports []string
			for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
				l, err := net.Listen("tcp", addr)
				if err != nil {
					continue
				}
				t.Cleanup(func() { l.Close() })
				ports = append(ports, l.Addr().String())
			}
			r := newRunner(t, engine.DefaultLimits, opts, engine.RunnerOptions{})
			prog := fmt.Sprintf(`import socket
out = {}
for a in %s:
    host, port = a.rsplit(':', 1)
    host = host.strip('[]')
    try:
        s = socket.socket(socket.AF_INET6 if ':' in host else socket.AF_INET)
        s.settimeout(2)
        s.connect((host, int(port)))
        out[a] = "reached"
    except OSError as e:
        out[a] = type(e).__name__
out`, pyList(ports...))
			res := run(t, r, prog, engine.Limits{})
			ok(t, res)
			for a, v := range valueMap(t, res) {
				if v == "reached" {
					t.Errorf("the program reached the host's listener %s", a)
				}
			}
			if !res.NetworkDenied || res.Guarantees.Get(engine.DimNetwork) != engine.Enforced {
				t.Errorf("network_denied %v, network graded %s; want true and enforced", res.NetworkDenied, res.Guarantees.Get(engine.DimNetwork))
			}
		})
	}
}

// Must show 3: a fork bomb ends with limit_hit process_count.
func TestForkBombHitsProcessCount(t *testing.T) {
	gate.Hostile(t)
	r := newRunner(t, engine.DefaultLimits, namespaces.Options{}, engine.RunnerOptions{})
	res := run(t, r, "import os\nwhile True:\n    os.fork()", engine.Limits{WallSeconds: 10, ProcessCount: 32})
	if res.Failure == nil || res.LimitHit == nil || *res.LimitHit != engine.LimitProcessCount {
		t.Fatalf("want limit_hit process_count, got failure %+v limit %v", res.Failure, res.LimitHit)
	}
}

// A process count of one is the program alone: the init that starts it (as root on cgroup v1
// it joins the group only by the thread that forks the interpreter, design §19.13) leaves the
// program room to run and none to fork.
func TestProcessCountOfOne(t *testing.T) {
	gate.AppliesOnly(t, os.Geteuid() == 0 && !cgroup.DetectLayout(cgroup.Root).V2,
		"the count is a cgroup v1 group's as root; without root it is RLIMIT_NPROC's, per uid in the user namespace, and on v2 the init is started inside the group (§19.13)")
	r := newRunner(t, engine.DefaultLimits, namespaces.Options{}, engine.RunnerOptions{})
	prog := "import os\ntry:\n    pid = os.fork()\nexcept OSError as e:\n    print('refused', e.errno)\nelse:\n    if pid == 0:\n        os._exit(0)\n    os.waitpid(pid, 0)\n    print('forked')"
	for _, tc := range []struct {
		count int
		want  string
	}{{1, "refused 11"}, {2, "forked"}} {
		res := run(t, r, prog, engine.Limits{WallSeconds: 10, ProcessCount: tc.count})
		if res.Failure != nil || !strings.Contains(res.Stdout, tc.want) {
			t.Errorf("process_count %d: want %q on stdout, got failure %+v stdout %q", tc.count, tc.want, res.Failure, res.Stdout)
		}
	}
}

// Must show 3: a full tmpfs workspace is the program's own OSError, not a limit.
func TestFullWorkspaceIsAnOSError(t *testing.T) {
	r := newRunner(t, engine.DefaultLimits, namespaces.Options{Tmpfs: spawned.Tmpfs{WorkspaceBytes: 64 << 20}}, engine.RunnerOptions{})
	prog := "chunk = b'x' * (1 << 20)\nfor i in range(100):\n    with open('f%d' % i, 'wb') as f:\n        for _ in range(8):\n            f.write(chunk)"
	res := run(t, r, prog, engine.Limits{FileSizeBytes: 10 << 20, MemoryBytes: 512 << 20})
	if res.Failure == nil || res.Failure.Kind != failure.ProgramError || res.LimitHit != nil {
		t.Fatalf("want program_error without a limit, got %+v limit %v", res.Failure, res.LimitHit)
	}
	if !strings.Contains(res.Failure.Message, "No space left") {
		t.Errorf("message %q does not say the device is full", res.Failure.Message)
	}
}

// Must show 4: a profile requiring isolated over a backend that cannot reach it refuses
// before anything runs, and names what was missing.
func TestRefusalBeforeRunning(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "marker")
	_ = os.Chmod(filepath.Dir(marker), 0o777)
	prog := fmt.Sprintf("open(%q, 'w').write('ran')", marker)

	t.Run("namespaces unavailable", func(t *testing.T) {
		for _, d := range []string{"namespaces", "userns"} {
			_, err := namespaces.New(context.Background(), &namespaces.Options{Options: spawned.Options{Disable: []string{d}}})
			if d == "userns" && os.Geteuid() == 0 {
				if err != nil {
					t.Errorf("as root the namespaces backend needs no user namespace, but New failed: %v", err)
				}
				continue
			}
			if err == nil || failure.KindOf(err) != failure.BackendUnavailable || !strings.Contains(err.Error(), "disabled") {
				t.Errorf("disable %s: New returned %v, want backend_unavailable naming the reason", d, err)
			}
		}
	})
	t.Run("weaker backend", func(t *testing.T) {
		b, err := process.New(context.Background(), &process.Options{})
		if err != nil {
			t.Fatal(err)
		}
		r, err := engine.NewRunner(b, &engine.RunnerOptions{Isolation: engine.LevelIsolated, AllowSameUID: os.Geteuid() != 0})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		res := run(t, r, prog, engine.Limits{})
		if res.Failure == nil || res.Failure.Kind != failure.IsolationUnavailable || res.Failure.Executed {
			t.Fatalf("want isolation_unavailable, executed false; got %+v", res.Failure)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("the program ran: %s exists", marker)
		}
	})
}

// The bootstrap runs as the interpreter compiled it once (internal/python), not compiled
// again by every child; with a cache dir the compiled form is remembered between backends.
func TestBootstrapRunsCompiled(t *testing.T) {
	cache := t.TempDir()
	for i := range 2 {
		r := newRunner(t, engine.DefaultLimits, namespaces.Options{Options: spawned.Options{CacheDir: cache}}, engine.RunnerOptions{})
		// The code after -c (the interpreter may start with -I -S or -I alone: internal/python).
		res := run(t, r, `(lambda a: a[a.index(b"-c") + 1])(open("/proc/self/cmdline", "rb").read().split(b"\0")).decode().splitlines()[0]`, engine.Limits{})
		ok(t, res)
		if string(res.Value) != `"# mcp-sandbox bootstrap (compiled)"` {
			t.Fatalf("backend %d: the child ran %s, not the compiled bootstrap", i, res.Value)
		}
	}
	if _, err := os.Stat(filepath.Join(cache, "python-inspect.json")); err != nil {
		t.Fatalf("nothing remembered in the cache dir: %v", err)
	}
}
