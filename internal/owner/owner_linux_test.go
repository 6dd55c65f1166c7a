//go:build linux

package owner

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

func TestDeadName(t *testing.T) {
	me := self()
	if !me.procOK {
		gate.Require(t, "proc", false, "no /proc of this pid namespace here")
	}
	// A process that has exited, for a pid nobody holds now.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	gone := cmd.Process.Pid
	otherBoot := "00000000"
	if me.boot == otherBoot {
		otherBoot = "11111111"
	}
	for _, c := range []struct {
		name string
		dead bool
	}{
		{Name("x"), false}, // this process
		{fmt.Sprintf("x-%d.1.%s.%s-ab", os.Getpid(), me.pidns, me.boot), true},   // this pid, another start: reused
		{fmt.Sprintf("x-%d.5.%s.%s-ab", gone, me.pidns, me.boot), true},          // no such process
		{fmt.Sprintf("x-%d.5.1.%s-ab", gone, me.boot), false},                    // another pid namespace
		{fmt.Sprintf("x-%d.5.%s.%s-ab", os.Getpid(), me.pidns, otherBoot), true}, // another boot
		{"x-0123456789abcdef", false},                                            // no tag
		{fmt.Sprintf("x-%d.5.%s.%s", gone, me.pidns, me.boot), false},            // no suffix
	} {
		if got := DeadName(c.name); got != c.dead {
			t.Errorf("DeadName(%q) = %v, want %v", c.name, got, c.dead)
		}
		// Another boot proves nothing about what may be another machine's.
		thisBoot := c.dead && !strings.Contains(c.name, "."+otherBoot+"-")
		if got := DeadNameThisBoot(c.name); got != thisBoot {
			t.Errorf("DeadNameThisBoot(%q) = %v, want %v", c.name, got, thisBoot)
		}
	}
	dir := t.TempDir()
	for _, n := range []string{fmt.Sprintf("w-%d.5.%s.%s-ab", gone, me.pidns, me.boot), Name("w"), "w-0123", "v-" + strings.Repeat("0", 4)} {
		if err := os.Mkdir(filepath.Join(dir, n), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if n := Sweep(dir, "w", os.Remove); n != 1 {
		t.Errorf("swept %d, want the one dead owner's", n)
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 3 {
		t.Errorf("left %v", left)
	}
}

// helperEnv makes the test binary an owner (TestLockProof): it prints its tag, holds its lock
// until its stdin ends, then dies by SIGKILL, as a killed server does.
const helperEnv = "MCP_SANDBOX_OWNER_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		fmt.Println(Tag())
		_, _ = io.Copy(io.Discard, os.Stdin)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	os.Exit(m.Run())
}

// startOwner starts the helper owner (in a pid namespace of its own when unshare is given),
// with its lock directory under tmp, and returns its tag and the end of its stdin.
func startOwner(t *testing.T, tmp string, unshare ...string) (string, io.Closer, *exec.Cmd) {
	t.Helper()
	argv := append(unshare, os.Args[0], "-test.run=^$")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), helperEnv+"=1", "TMPDIR="+tmp)
	in, out := testkit.StartPiped(t, cmd)
	t.Cleanup(func() { in.Close(); _ = cmd.Wait() })
	line, err := bufio.NewReader(io.LimitReader(out, 200)).ReadString('\n')
	tag := strings.TrimSpace(line)
	if err != nil || !tagOnly().MatchString(tag) {
		t.Fatalf("the helper owner printed %q (%v), not a tag", line, err)
	}
	return tag, in, cmd
}

// TestLockProof: an owner in another pid namespace, whose pid proves nothing here, is proven
// dead by its lock once it dies, and never while it lives; a lock file nobody made, or one in
// a directory others may write, proves nothing.
func TestLockProof(t *testing.T) {
	me := self()
	if !me.procOK {
		gate.Require(t, "proc", false, "no /proc of this pid namespace here")
	}
	unshare, err := exec.LookPath("unshare")
	gate.Require(t, "unshare", err == nil, "unshare (util-linux) is not installed")
	gate.Require(t, "root", os.Geteuid() == 0, "a pid namespace of the owner's own is made as root")
	tmp := t.TempDir()
	locks := filepath.Join(tmp, "mcp-sandbox-owners-"+strconv.Itoa(os.Geteuid()))

	tag, stdin, cmd := startOwner(t, tmp, unshare, "--pid", "--fork", "--mount-proc", "--kill-child")
	if f := strings.Split(tag, "."); f[2] == me.pidns {
		t.Fatalf("the helper owner %s is in this pid namespace", tag)
	}
	if _, known := pidDead(tagOnly().FindStringSubmatch(tag)); known {
		t.Fatalf("the pid of %s, in another pid namespace, decides its death here", tag)
	}
	if dead(tag, locks) {
		t.Fatal("a live owner in another pid namespace reads as dead")
	}
	// Another sweep in the same moment finds the lock taken too.
	if dead(tag, locks) {
		t.Fatal("a live owner reads as dead on a second look")
	}
	stdin.Close()
	_ = cmd.Wait()
	if !dead(tag, locks) {
		t.Fatal("an owner that was killed is not proven dead by its free lock")
	}
	name := "w-" + tag + "-ab"
	if m := tagged().FindStringSubmatch(name); m == nil || m[1] != tag {
		t.Fatalf("%s does not carry its tag", name)
	}

	// A tag with no lock file: nothing proves it dead (an entry not made by an owner here).
	if other := strings.Replace(tag, ".", "9.", 1); dead(other, locks) {
		t.Errorf("%s has no lock file, yet reads as dead", other)
	}
	// A free lock file in a directory another account may write proves nothing.
	if err := os.Chmod(locks, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := OwnDir(locks); err == nil {
		t.Error("a lock directory others may write is trusted")
	}
	if err := os.Chmod(locks, 0o700); err != nil {
		t.Fatal(err)
	}

	// Pruning: a dead owner's lock file goes once it is old; a live owner's never does.
	liveTag, _, _ := startOwner(t, tmp)
	old := time.Now().Add(-2 * lockPrune)
	for _, tg := range []string{tag, liveTag} {
		if err := os.Chtimes(filepath.Join(locks, tg+".lock"), old, old); err != nil {
			t.Fatal(err)
		}
	}
	pruneLocks(locks, func(tg string) bool { return dead(tg, locks) })
	if _, err := os.Stat(filepath.Join(locks, tag+".lock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead owner's old lock file was not pruned: %v", err)
	}
	if _, err := os.Stat(filepath.Join(locks, liveTag+".lock")); err != nil {
		t.Errorf("a live owner's lock file was pruned: %v", err)
	}
}

// TestForeignLockDirWarned (issue 38): an owners' lock directory another account made before
// this one's first server is not used, and the server says so: LockDirProblem names the
// directory and what to do, and the first use of a tag logs it as a warning (it used to turn
// the lock proof off in silence).
func TestForeignLockDirWarned(t *testing.T) {
	gate.Require(t, "root", os.Geteuid() == 0, "a directory of another account's is made as root")
	tmp := t.TempDir()
	locks := filepath.Join(tmp, "mcp-sandbox-owners-"+strconv.Itoa(os.Geteuid()))
	if err := os.Mkdir(locks, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(locks, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmp)
	if dir, why := lockDir(); dir != "" || !strings.Contains(why, "belongs to another user") || !strings.Contains(why, locks) {
		t.Errorf("lockDir() = %q, %q; want none, and why naming %s", dir, why, locks)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	out, _ := cmd.CombinedOutput() // the helper kills itself
	if !strings.Contains(string(out), "owner locks: the owners' lock directory cannot be used") ||
		!strings.Contains(string(out), "belongs to another user") {
		t.Errorf("the first use of a tag under a foreign lock directory logged:\n%s", out)
	}
	if _, why := lockDir(); why == "" {
		t.Fatal("the foreign directory was taken over")
	}
	if err := os.Chown(locks, os.Geteuid(), os.Getegid()); err != nil {
		t.Fatal(err)
	}
	if dir, why := lockDir(); dir != locks || why != "" {
		t.Errorf("this account's own directory: %q, %q", dir, why)
	}
}

// TestPruneDue: the lock directory is pruned at most once per pruneEvery across processes,
// as the mark's time says, and a mark that is missing, from the future or not a plain file
// leaves the prune due.
func TestPruneDue(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	if !pruneDue(dir, now) {
		t.Fatal("a directory never pruned is not due")
	}
	if pruneDue(dir, now.Add(pruneEvery/2)) {
		t.Error("pruned again within pruneEvery of the last prune")
	}
	if !pruneDue(dir, now.Add(pruneEvery+time.Minute)) {
		t.Error("not due once pruneEvery has passed")
	}
	// A mark dated ahead of the clock (a clock set back) proves nothing.
	future := now.Add(24 * time.Hour)
	if err := os.Chtimes(filepath.Join(dir, pruneMark), future, future); err != nil {
		t.Fatal(err)
	}
	if !pruneDue(dir, now) {
		t.Error("a mark from the future kept the prune from being due")
	}
	// A link in its place is not followed, and proves nothing.
	other := t.TempDir()
	mark := filepath.Join(dir, pruneMark)
	if err := os.Remove(mark); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(other, "target"), mark); err != nil {
		t.Fatal(err)
	}
	first := pruneDue(dir, now)
	second := pruneDue(dir, now) // the link is still in the mark's place: no mark was written
	if !first || !second {
		t.Error("a link in the mark's place kept the prune from being due")
	}
	if _, err := os.Lstat(filepath.Join(other, "target")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the mark followed a link: %v", err)
	}
	// The mark survives a prune of old files.
	if err := os.Remove(mark); err != nil {
		t.Fatal(err)
	}
	pruneDue(dir, now)
	old := now.Add(-2 * lockPrune)
	if err := os.Chtimes(mark, old, old); err != nil {
		t.Fatal(err)
	}
	pruneLocks(dir, func(string) bool { return true })
	if _, err := os.Lstat(mark); err != nil {
		t.Errorf("a prune removed the mark: %v", err)
	}
}
