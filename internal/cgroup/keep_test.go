//go:build linux

package cgroup

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// TestKeptGroupsAreReused: with Keep, an emptied group's directories go to the next New,
// with that New's limits written and its counters counted from zero although the kernel's
// are not; a group its kill did not empty, or one past Keep, is removed; Close removes what
// is kept.
func TestKeptGroupsAreReused(t *testing.T) {
	m, err := Detect(Base)
	gate.Require(t, "cgroup", err == nil, fmt.Sprintf("no usable cgroup hierarchy: %v", err))
	m.Keep(1)
	t.Cleanup(func() { m.Close() })
	id := fmt.Sprintf("keep-test-%d", os.Getpid())
	g, err := m.New(id+"-a", 64<<20, 1)
	if err != nil {
		t.Fatal(err)
	}
	// A shell in the group, allowed one process (itself): its fork fails at pids.max.
	sh := exec.Command("sh", "-c", "read x; /bin/true; exit 0")
	in, err := sh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	for _, p := range g.ProcsFiles() {
		if err := os.WriteFile(p, []byte(strconv.Itoa(sh.Process.Pid)), 0); err != nil {
			t.Fatal(err)
		}
	}
	in.Write([]byte("go\n"))
	in.Close()
	_ = sh.Wait()
	if e := g.Events(); e.PIDsMax == 0 {
		t.Fatalf("the refused fork was not counted: %+v", e)
	}
	dirs := g.dirs
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("an emptied group was not kept: %v", err)
		}
	}
	h, err := m.New(id+"-b", 32<<20, 7)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(h.dirs, ",") != strings.Join(dirs, ",") {
		t.Fatalf("New made %v, not the kept %v", h.dirs, dirs)
	}
	if e := h.Events(); e != (Events{}) {
		t.Errorf("the kept group's new user starts with the last one's counters: %+v", e)
	}
	if b, _ := os.ReadFile(filepath.Join(h.dirs[len(h.dirs)-1], "pids.max")); strings.TrimSpace(string(b)) != "7" {
		t.Errorf("pids.max %q, want the new limit 7", b)
	}
	g.Remove() // the first user's second Remove touches nothing of the second's
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("a stale Remove removed the group in use: %v", err)
		}
	}
	// One kept at most: the second of two emptied groups is removed, Close removes the first.
	k, err := m.New(id+"-c", 32<<20, 7)
	if err != nil {
		t.Fatal(err)
	}
	h.Remove()
	k.Remove()
	for _, d := range k.dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("a group past Keep was kept: %s (%v)", d, err)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("Close left the kept group %s (%v)", d, err)
		}
	}
}
