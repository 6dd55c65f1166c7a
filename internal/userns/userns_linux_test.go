package userns

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
)

// ownRange is this user's subordinate range; the test applies only without root (root maps
// ids directly) and needs one (CI runs it as a user with one, MCP_SANDBOX_REQUIRE=subids).
func ownRange(t *testing.T) *SubIDs {
	t.Helper()
	gate.AppliesOnly(t, os.Geteuid() != 0, "root maps ids directly; newuidmap is for a user without root (CI runs this as one)")
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	s, why := Host{}.Subordinate(u.Username, os.Geteuid())
	gate.Require(t, "subids", s != nil, why)
	return s
}

// unmapped starts a process in a user namespace of its own, not yet mapped, killed and reaped
// when t ends; it returns its pid.
func unmapped(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sleep", "3600") // killed at the end, so never a deadline
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// TestMapRunsNewuidmap: a user with a subordinate range maps a user namespace of its own
// through newuidmap and newgidmap, its own uid at 0 and the last subordinate id at 65534.
func TestMapRunsNewuidmap(t *testing.T) {
	s := ownRange(t)
	pid := unmapped(t)
	if err := s.Map(context.Background(), pid, os.Geteuid(), os.Getegid(), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	for file, id := range map[string]int{"uid_map": s.UID, "gid_map": s.GID} {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/" + file)
		if f := strings.Fields(string(b)); len(f) != 6 || f[1] != strconv.Itoa(os.Geteuid()) && file == "uid_map" || f[3] != "65534" || f[4] != strconv.Itoa(id) {
			t.Errorf("%s = %q, want 0 to this user and 65534 to %d", file, b, id)
		}
	}
}

// TestMapRangesMapsABlock: a user with a subordinate range maps its own uid at 0 and a block
// of the range, numbered inside as outside, in one namespace (a template's layout).
func TestMapRangesMapsABlock(t *testing.T) {
	s := ownRange(t)
	if s.UIDCount < 16 || s.GIDCount < 16 {
		t.Fatalf("ranges of %d uids and %d gids, want at least 16", s.UIDCount, s.GIDCount)
	}
	pid := unmapped(t)
	uid, gid := s.UID-10, s.GID-10
	err := s.MapRanges(context.Background(), pid, []Range{{0, os.Geteuid(), 1}, {uid, uid, 8}},
		[]Range{{0, os.Getegid(), 1}, {uid, gid, 8}})
	if err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string][]int{"uid_map": {0, os.Geteuid(), 1, uid, uid, 8}, "gid_map": {0, os.Getegid(), 1, uid, gid, 8}} {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/" + file)
		var got []int
		for _, f := range strings.Fields(string(b)) {
			n, _ := strconv.Atoi(f)
			got = append(got, n)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s = %v, want %v", file, got, want)
		}
	}
}
