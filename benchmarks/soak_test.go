//go:build linux

package benchmarks

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/mcp-sandbox/mcp-sandbox/budget"
	"github.com/mcp-sandbox/mcp-sandbox/budget/sqlite"
	"github.com/mcp-sandbox/mcp-sandbox/engine"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/namespaces"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/process"
	"github.com/mcp-sandbox/mcp-sandbox/engine/backend/spawned"
	"github.com/mcp-sandbox/mcp-sandbox/internal/owner"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
	"github.com/mcp-sandbox/mcp-sandbox/mcpserver"
	"github.com/mcp-sandbox/mcp-sandbox/outputs"
	"github.com/mcp-sandbox/mcp-sandbox/upstream"
)

var soakExecutions = flag.Int("soak-executions", 120, "executions the soak runs (make soak: 10000)")

// soakPrograms cycle through what executions do: a value, output kept inline and under a
// handle, a failure, binding calls to the upstream, an artifact, a built-in, a daemon left
// behind for the tree kill, a subprocess, and an interpreter that exits by itself.
var soakPrograms = []string{
	"6*7",
	"print('hello'); [1, 2, 3]",
	"print('x' * 200000)",
	"1 / 0",
	"[ (await support__add(a=i, b=1))['sum'] for i in range(3) ]",
	"open('artifact.txt', 'w').write('kept'); 'written'",
	"len(await list_tools())",
	"import os, time\nif os.fork() == 0:\n    time.sleep(60)\n'left a daemon'",
	"import subprocess\nsubprocess.run(['/bin/true']).returncode",
	"import os\nos._exit(3)",
}

// snapshot is what an execution could leak, counted for this process; hostUIDs counts the
// live processes running as one of root's subordinate uids (a template's and its forked
// children's pid 1 run as the last of them) that descend from this process, which TestSoak
// makes a child subreaper so that nothing its backend started can leave its tree by being
// orphaned: other test processes on the machine (CI runs packages side by side) start
// templates of their own under the same uids.
type snapshot struct {
	fds, goroutines, tempEntries, cgroups, mounts, hostUIDs int
}

// exceeds reports whether s holds more of anything than base: a leak. Fewer is no leak (a
// goroutine the test process had started before the soak, say, may end during it).
func (s snapshot) exceeds(base snapshot) bool {
	return s.fds > base.fds || s.goroutines > base.goroutines || s.tempEntries > base.tempEntries ||
		s.cgroups > base.cgroups || s.mounts > base.mounts || s.hostUIDs > base.hostUIDs
}

func (s snapshot) String() string {
	return fmt.Sprintf("fds %d, goroutines %d, temporary entries %d, cgroups %d, mounts %d, processes of root's subordinate uids %d",
		s.fds, s.goroutines, s.tempEntries, s.cgroups, s.mounts, s.hostUIDs)
}

// subordinateProcesses counts the live (not zombie) processes descending from this one whose
// real uid is in root's subordinate uid range (/etc/subuid), or 0 without one.
func subordinateProcesses() int {
	b, _ := os.ReadFile("/etc/subuid")
	var lo, n int
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Split(l, ":"); len(f) == 3 && (f[0] == "root" || f[0] == "0") {
			lo, _ = strconv.Atoi(f[1])
			n, _ = strconv.Atoi(f[2])
		}
	}
	if n == 0 {
		return 0
	}
	type proc struct {
		ppid, uid int
		live      bool
	}
	procs := map[int]proc{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		p := proc{uid: -1, live: true}
		for _, l := range strings.Split(string(st), "\n") {
			if v, ok := strings.CutPrefix(l, "State:"); ok {
				p.live = !strings.HasPrefix(strings.TrimSpace(v), "Z")
			} else if v, ok := strings.CutPrefix(l, "PPid:"); ok {
				p.ppid, _ = strconv.Atoi(strings.TrimSpace(v))
			} else if v, ok := strings.CutPrefix(l, "Uid:"); ok {
				if f := strings.Fields(v); len(f) > 0 {
					p.uid, _ = strconv.Atoi(f[0])
				}
			}
		}
		procs[pid] = p
	}
	self := os.Getpid()
	descends := func(pid int) bool {
		for range len(procs) { // a bound: a parent chain read while it changes may loop
			if pid == self {
				return true
			}
			p, ok := procs[pid]
			if !ok || pid <= 1 {
				return false
			}
			pid = p.ppid
		}
		return false
	}
	count := 0
	for pid, p := range procs {
		if p.live && p.uid >= lo && p.uid < lo+n && descends(pid) {
			count++
		}
	}
	return count
}

func countDir(dir string, keep func(string) bool) int {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if keep == nil || keep(e.Name()) {
			n++
		}
	}
	return n
}

// takeSnapshot counts this process's descriptors and goroutines, the entries of its temporary
// directory, the cgroups named for it (owner tags carry the pid), and the mounts of its mount
// namespace that are the sandbox's (under its temporary directory, or named mcp-sandbox):
// other sessions on a shared machine mount and unmount in that namespace too.
func takeSnapshot(tmp string) snapshot {
	info, _ := os.ReadFile("/proc/self/mountinfo")
	mounts := 0
	for _, l := range strings.Split(string(info), "\n") {
		if strings.Contains(l, tmp) || strings.Contains(l, "mcp-sandbox") {
			mounts++
		}
	}
	mine := "-" + strconv.Itoa(os.Getpid()) + "."
	cg := 0
	for _, ctrl := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/unified"} {
		cg += countDir(filepath.Join(ctrl, "mcp-sandbox"), func(n string) bool { return strings.Contains(n, mine) })
	}
	return snapshot{
		fds:         countDir("/proc/self/fd", nil),
		goroutines:  runtime.NumGoroutine(),
		tempEntries: countDir(tmp, nil),
		cgroups:     cg,
		mounts:      mounts,
		hostUIDs:    subordinateProcesses(),
	}
}

// TestSoak runs -soak-executions run_code calls (make soak: 10,000; CI: a few hundred)
// through the MCP face in this process, on the strongest local backend with a warm pool, a
// SQLite ledger, a blob store and the mock upstream, and checks that file descriptors,
// goroutines, temporary directories, cgroups, mounts and the processes of root's subordinate
// uids are where they started once everything is closed. On the namespaces backend the warm
// children are forked from templates, as warm.start auto has the server do, where this host
// allows it (the log says how many were).
func TestSoak(t *testing.T) {
	mock := testkit.MockUpstream(t)
	initPath := testkit.WorldExecutable(t)
	tmp := t.TempDir()
	// A template's helper, an unprivileged host uid, mounts its root in the temporary
	// directory: it must be able to search it.
	for _, d := range []string{tmp, filepath.Dir(tmp)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("TMPDIR", tmp) // everything the sandbox makes in a temporary directory lands here
	// This process's owner tag (internal/owner) holds a lock file in the temporary directory
	// for the process's life, by design: taken before the first snapshot, it is not a leak.
	_ = owner.Tag()
	// Orphans of the backend's tree are reparented to this process, so they are still counted
	// as its (subordinateProcesses) and not mistaken for another process's.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatalf("becoming a child subreaper: %v", err)
	}
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })
	data := t.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	before := takeSnapshot(tmp)

	ctx := context.Background()
	var b engine.Backend
	var err error
	level := engine.LevelProcess
	if ok, _ := namespaces.Available(&namespaces.Options{}); ok {
		var nb *namespaces.Backend
		nb, err = namespaces.New(ctx, &namespaces.Options{Options: spawned.Options{CacheDir: data, InitPath: initPath}, Template: true})
		if err == nil {
			if why := nb.TemplateWhy(); why != "" {
				t.Logf("warm children are exec'd: %s", why)
			}
		}
		b, level = nb, engine.LevelIsolated
	} else {
		b, err = process.New(ctx, &process.Options{Options: spawned.Options{CacheDir: data}})
	}
	if err != nil {
		t.Fatal(err)
	}
	runner, err := engine.NewRunner(b, &engine.RunnerOptions{AllowSameUID: os.Geteuid() != 0, Isolation: level,
		Artifacts: engine.ArtifactPolicy{Collect: true, MaxFiles: 8, MaxBytes: 1 << 20},
		Warm:      engine.WarmPolicy{Min: 1, Max: 4, Idle: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	led, err := sqlite.Open(ctx, filepath.Join(data, "ledger"), nil)
	if err != nil {
		t.Fatal(err)
	}
	blobs, err := outputs.OpenFileStore(filepath.Join(data, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	pool, err := upstream.NewPool(&upstream.PoolOptions{Servers: []upstream.Server{{Name: "support", Command: []string{mock}}}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	terms := runner.Terms(engine.Terms{Isolation: level})
	runner.Prewarm("t", terms)
	agent := mcpserver.Agent{Tenant: "t", Name: "a",
		CodeExecution: &mcpserver.CodeExec{Sandbox: runner, Terms: terms,
			Budget: budget.Limits{MaxCalls: 1 << 30, MaxTotalBytes: 1 << 40, MaxProducedBytes: 1 << 40, MaxPreservedBytes: 1 << 40,
				MaxArgumentBytes: 1 << 20, MaxResultBytes: 1 << 20}},
		Upstreams: &mcpserver.Upstreams{Catalogue: pool.Catalogue, Grant: []string{"support"}}}
	drain := mcpserver.NewDrain()
	srv := mcpserver.NewServer(agent, &mcpserver.Options{Ledger: led, Blobs: blobs, Logger: quiet, Drain: drain})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "soak", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	failures := map[string]int{}
	var kinds startKinds
	for i := range *soakExecutions {
		code := soakPrograms[i%len(soakPrograms)]
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": code}})
		if err != nil {
			t.Fatalf("execution %d: %v", i, err)
		}
		kinds.add(res)
		if res.IsError {
			kind := strings.SplitN(testkit.Text(res), ":", 2)[0]
			failures[kind]++
			if code != "1 / 0" && code != "import os\nos._exit(3)" {
				t.Fatalf("execution %d (%q) failed: %s", i, code, testkit.Text(res))
			}
		}
		if (i+1)%1000 == 0 {
			t.Logf("%d executions, %.1f/s; now %s", i+1, float64(i+1)/time.Since(start).Seconds(), takeSnapshot(tmp))
		}
	}
	elapsed := time.Since(start)
	cs.Close()
	ss.Close()
	drain.Stop()
	if !drain.Close(30 * time.Second) {
		t.Error("the session did not close")
	}
	if err := runner.Close(); err != nil {
		t.Error(err)
	}
	pool.Close()
	led.Close()

	var after snapshot
	deadline := time.Now().Add(15 * time.Second)
	for {
		after = takeSnapshot(tmp)
		if !after.exceeds(before) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	out := fmt.Sprintf("soak: %d executions in %s (%.1f/s), children: %s; failures as programmed: %v\n  before: %s\n  after:  %s\n",
		*soakExecutions, elapsed.Round(time.Millisecond), float64(*soakExecutions)/elapsed.Seconds(), &kinds, failures, before, after)
	t.Log(out)
	if after.exceeds(before) {
		t.Errorf("the soak left something behind:\n%s", out)
	}
}
