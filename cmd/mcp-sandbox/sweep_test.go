//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/owner"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

const sweepConfig = `
data_dir: "-"
profiles:
  proc: {backend: process, isolation: process}
  ns:   {backend: namespaces, isolation: isolated}
tenants:
  t:
    agents:
      default: {code_execution: {profile: proc}}
      iso:     {code_execution: {profile: ns}}
`

// cgroupParents are where the servers' cgroups live on this host, v2 or v1.
var cgroupParents = []string{"/sys/fs/cgroup/mcp-sandbox", "/sys/fs/cgroup/memory/mcp-sandbox", "/sys/fs/cgroup/pids/mcp-sandbox"}

func entries(dir string) []string {
	es, _ := os.ReadDir(dir)
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// ownedBy lists the cgroups named with pid's owner tag.
func ownedBy(pid int) []string {
	var out []string
	for _, p := range cgroupParents {
		for _, n := range entries(p) {
			if strings.Contains(n, "-"+strconv.Itoa(pid)+".") {
				out = append(out, filepath.Join(p, n))
			}
		}
	}
	return out
}

// TestSweepAfterKill: a server killed with SIGKILL left its warm children's workspaces, root
// mount points and cgroups behind for ever. The next server sweeps them on start, and nothing
// else: not a live owner's, not one in another pid namespace (which it cannot check), not an
// untagged name (an older version's, another program's).
func TestSweepAfterKill(t *testing.T) {
	writable := false
	for _, p := range cgroupParents {
		if _, err := os.Stat(filepath.Dir(p)); err == nil && os.Geteuid() == 0 {
			writable = true
		}
	}
	gate.Require(t, "cgroup", writable, "the leftovers worth sweeping (cgroups, a dropped identity's workspaces) are made as root with a cgroup hierarchy")
	tmp := t.TempDir()
	env := []string{"TMPDIR=" + tmp}
	cfg := testkit.WriteConfig(t, sweepConfig)
	wsDir := filepath.Join(tmp, "mcp-sandbox-workspaces")

	_, first := startHTTPArgs(t, cfg, env)
	pid := first.Process.Pid
	var left, leftRoots, leftGroups []string
	if !waitFor(20*time.Second, func() bool {
		left, leftRoots, leftGroups = entries(wsDir), slices.DeleteFunc(entries(tmp), func(n string) bool { return !strings.HasPrefix(n, "mcp-sandbox-root-") }), ownedBy(pid)
		return len(left) > 0 && len(leftRoots) > 0 && len(leftGroups) > 0
	}) {
		t.Fatalf("the first server's warm children made no workspace (%v), root (%v) or cgroup (%v)", left, leftRoots, leftGroups)
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()

	// Decoys the sweep must leave: a live owner's (this test's), another pid namespace's, and
	// an untagged name.
	me := owner.Tag()
	f := strings.Split(me, ".")
	decoys := []string{
		owner.Name("mcp-sandbox-ws"),
		fmt.Sprintf("mcp-sandbox-ws-%d.%s.1.%s-abcd", pid, f[1], f[3]),
		"mcp-sandbox-ws-0123456789abcdef",
	}
	for _, d := range decoys {
		if err := os.Mkdir(filepath.Join(wsDir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	liveGroup := filepath.Join(cgroupParents[2], owner.Name("decoy"))
	if _, err := os.Stat(cgroupParents[2]); err != nil {
		liveGroup = filepath.Join(cgroupParents[0], owner.Name("decoy"))
	}
	if err := os.Mkdir(liveGroup, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(liveGroup)

	startHTTPArgs(t, cfg, env)
	now := entries(wsDir)
	for _, n := range left {
		if slices.Contains(now, n) {
			t.Errorf("workspace %s of the killed server is still there", n)
		}
	}
	for _, n := range leftRoots {
		if _, err := os.Stat(filepath.Join(tmp, n)); err == nil {
			t.Errorf("root mount point %s of the killed server is still there", n)
		}
	}
	for _, g := range leftGroups {
		if _, err := os.Stat(g); err == nil {
			t.Errorf("cgroup %s of the killed server is still there", g)
		}
	}
	for _, d := range decoys {
		if !slices.Contains(now, d) {
			t.Errorf("%s was swept: its owner was not proven dead", d)
		}
	}
	if _, err := os.Stat(liveGroup); err != nil {
		t.Errorf("a live owner's cgroup was swept: %v", err)
	}
}
