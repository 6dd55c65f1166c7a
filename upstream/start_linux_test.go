package upstream

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// slowStart is a stdio server that starts helpers and then takes long before it answers
// initialize, as npx does on a first start: a child in its process group, a grandchild in a
// session of its own (a parent-pid walk still finds it), and a daemon that left both its
// group and its parent (double fork; only the inherited marker finds it). Each writes its pid
// to dir, then it sleeps delay seconds and becomes the mock.
func slowStart(dir string, delay int) []string {
	script := fmt.Sprintf(`sleep 600 & echo $! > %[1]s/child
setsid sleep 601 & echo $! > %[1]s/session
setsid sh -c 'sleep 602 & echo $! > %[1]s/daemon' &
wait $!
sleep %[2]d
exec %[3]s`, dir, delay, mockBin)
	return []string{"sh", "-c", script}
}

// A server whose first start passes its first-start timeout is killed there with its whole
// process tree (its group, its descendants, and a daemon that left both), and the model is
// told it timed out, not that it exited.
func TestFirstStartTimeoutKillsTheWholeTree(t *testing.T) {
	dir := t.TempDir()
	tag := fmt.Sprintf("tree-%d-%d", os.Getpid(), time.Now().UnixNano())
	logs := &testkit.Log{}
	p, err := NewPool(&PoolOptions{
		Servers: []Server{{Name: "slow", Command: slowStart(dir, 600), Env: map[string]string{"TEST_TREE_TAG": tag},
			ConnectTimeout: time.Second, FirstStartTimeout: 3 * time.Second}},
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	problems := p.Catalogue(context.Background()).Problems()
	got := problems["slow"]
	if !strings.Contains(got, "timed out while starting") || !strings.Contains(got, "3s") || strings.Contains(got, "exited") {
		t.Errorf("problem = %q, want it to say it timed out after 3s (and not that it exited)", got)
	}
	if !strings.Contains(logs.String(), "timed out while starting; its process tree was killed") {
		t.Errorf("the log does not say the start timed out:\n%s", logs)
	}
	var pids []int
	for _, name := range []string{"child", "session", "daemon"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("the server did not start its %s: %v\n%s", name, err, logs)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	// SIGKILL is delivered at once, but a killed process leaves /proc only once reaped: wait
	// for that, bounded, rather than assume it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		left := testkit.Tagged("TEST_TREE_TAG", tag)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of the server's tree outlived its timeout: %v (helpers were %v)", left, pids)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A host's listing (Current) never waits for a server still starting: it returns within its
// wait with the starting servers named, a server that answers later is announced as a change
// (OnToolsChanged) and listed from then on, and Close kills the whole tree of one that never
// answered (a start that outlived the session was how issue 37's upstream trees were left to
// init).
func TestCurrentDoesNotWaitForAStartingServer(t *testing.T) {
	dir := t.TempDir()
	late, stuck := filepath.Join(dir, "late"), filepath.Join(dir, "stuck")
	for _, d := range []string{late, stuck} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tag := fmt.Sprintf("stuck-%d-%d", os.Getpid(), time.Now().UnixNano())
	changed := make(chan string, 16)
	logs := &testkit.Log{}
	p, err := NewPool(&PoolOptions{
		Servers: []Server{
			{Name: "late", Command: slowStart(late, 2), FirstStartTimeout: time.Minute},
			{Name: "stuck", Command: slowStart(stuck, 600), Env: map[string]string{"TEST_TREE_TAG": tag}, FirstStartTimeout: time.Hour},
		},
		Logger:         slog.New(slog.NewTextHandler(logs, nil)),
		OnToolsChanged: func(s string) { changed <- s },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	start := time.Now()
	cat := p.Current(context.Background(), 100*time.Millisecond)
	if d := time.Since(start); d > gate.Scaled(5*time.Second) {
		t.Errorf("Current took %v with servers still starting", d)
	}
	if len(cat.Tools()) != 0 {
		t.Errorf("Current listed %d tools of servers that have not answered", len(cat.Tools()))
	}
	for _, s := range []string{"late", "stuck"} {
		if !strings.Contains(cat.Problems()[s], "starting") {
			t.Errorf("problem of %s = %q, want it to say the server is starting", s, cat.Problems()[s])
		}
	}
	select {
	case s := <-changed:
		if s != "late" {
			t.Errorf("announced a change of %q, want late", s)
		}
	case <-time.After(gate.Scaled(60 * time.Second)):
		t.Fatalf("the late server's listing was never announced\n%s", logs)
	}
	cat = p.Current(context.Background(), 100*time.Millisecond)
	if _, ok := cat.Lookup("late__add"); !ok {
		t.Errorf("after its announcement the late server's tools are not listed")
	}
	closed := time.Now()
	p.Close()
	if d := time.Since(closed); d > gate.Scaled(10*time.Second) {
		t.Errorf("Close took %v with a server still starting", d)
	}
	deadline := time.Now().Add(gate.Scaled(30 * time.Second))
	for len(testkit.Tagged("TEST_TREE_TAG", tag)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("processes of a server still starting outlived Close: %v", testkit.Tagged("TEST_TREE_TAG", tag))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
