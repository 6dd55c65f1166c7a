//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/testkit"
)

// After doctor as an ordinary user, no new process of that user remains. Rootless podman
// starts a pause process at its first command and nothing ends it: doctor's container probe
// (podman version, image inspect) left one per user. As root the test runs doctor as each of
// CI's users without root (.ci/run makes them: ciUsers); as such a user, as itself.
func TestDoctorLeavesNoProcess(t *testing.T) {
	_, err := exec.LookPath("podman")
	gate.Require(t, "podman", err == nil, "podman is not installed: doctor's container probe runs nothing")
	// A container profile too: doctor opens it (container.New) and describes it (a probe in a
	// container, where the image is present).
	cfg := testkit.WriteConfig(t, `
data_dir: "-"
profiles:
  plain: {backend: process, isolation: process}
  boxed: {backend: container, isolation: isolated}
tenants:
  t1:
    agents:
      a: {code_execution: {profile: plain}}
`)
	if os.Geteuid() != 0 {
		doctorLeavesNothing(t, os.Geteuid(), func() *exec.Cmd { return exec.Command(testkit.Binary(t), "doctor", "--config", cfg) })
		return
	}
	// The binary and the config where the users can read them.
	dir, err := os.MkdirTemp("", "mcp-sandbox-doctor-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "mcp-sandbox")
	data, err := os.ReadFile(testkit.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	cfgData, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{os.WriteFile(bin, data, 0o755), os.WriteFile(filepath.Join(dir, "config.yaml"), cfgData, 0o644), os.Chmod(dir, 0o755)} {
		if err != nil {
			t.Fatalf("making the binary and config readable by the users: %v", err)
		}
	}
	for _, name := range ciUsers {
		u, err := user.Lookup(name)
		gate.Require(t, "ci-users", err == nil, fmt.Sprintf("no user %s: .ci/run makes it (a user without root that CI runs tests as)", name))
		t.Run(name, func(t *testing.T) {
			uid, _ := strconv.Atoi(u.Uid)
			gid, _ := strconv.Atoi(u.Gid)
			doctorLeavesNothing(t, uid, func() *exec.Cmd {
				cmd := exec.Command(bin, "doctor", "--config", filepath.Join(dir, "config.yaml"))
				cmd.Dir = u.HomeDir
				cmd.Env = []string{"HOME=" + u.HomeDir, "USER=" + name, "PATH=/usr/local/bin:/usr/bin:/bin"}
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
				return cmd
			})
		})
	}
}

// ciUsers are the users without root .ci/run makes: one without a subordinate id range, one
// with.
var ciUsers = []string{"mcps-newcomer", "mcps-subuid"}

// doctorLeavesNothing runs doctor and fails if a process of uid that was not running before
// is running after it.
func doctorLeavesNothing(t *testing.T, uid int, doctor func() *exec.Cmd) {
	t.Helper()
	before := processesOf(uid)
	for pid, p := range before {
		if p.comm == "podman pause" {
			t.Logf("podman's pause process of uid %d runs already (pid %d): the probe joins it, and this run proves less", uid, pid)
		}
	}
	cmd := doctor()
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatalf("doctor: %v", err)
	}
	if !strings.Contains(string(out), "container") {
		t.Fatalf("doctor (%v) did not report the container backend:\n%s", err, out)
	}
	var left []string
	deadline := time.Now().Add(gate.Scaled(2 * time.Second)) // a killed process is gone a moment later
	for {
		left = left[:0]
		for pid, p := range processesOf(uid) {
			if b, ok := before[pid]; ok && b.start == p.start {
				continue
			}
			if p.state == "Z" || p.descends(os.Getpid()) {
				continue // dead, or this test binary's own (another test's child)
			}
			left = append(left, fmt.Sprintf("pid %d %q: %s", pid, p.comm, p.cmdline))
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("processes of uid %d outlived doctor:\n%s\ndoctor said:\n%s", uid, strings.Join(left, "\n"), out)
	}
}

// userProc is one process, as this test tells processes apart.
type userProc struct {
	comm, state, cmdline string
	start                string // start time in ticks: with the pid, one process
	ppid                 int
}

// processesOf lists the processes whose real uid is uid.
func processesOf(uid int) map[int]userProc {
	entries, _ := os.ReadDir("/proc")
	out := map[int]userProc{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, ok := readProc(pid)
		if !ok {
			continue
		}
		status, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(status), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" && f[1] == strconv.Itoa(uid) {
				out[pid] = p
			}
		}
	}
	return out
}

func readProc(pid int) (userProc, bool) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return userProc{}, false
	}
	// pid (comm) state ppid ... starttime (field 22): comm may hold spaces and parentheses.
	s := string(stat)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return userProc{}, false
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 20 {
		return userProc{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
	return userProc{comm: s[open+1 : end], state: f[0], ppid: ppid, start: f[19],
		cmdline: strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))}, true
}

// descends reports whether the process descends from ancestor.
func (p userProc) descends(ancestor int) bool {
	for pid, hops := p.ppid, 0; pid > 1 && hops < 64; hops++ {
		if pid == ancestor {
			return true
		}
		q, ok := readProc(pid)
		if !ok {
			return false
		}
		pid = q.ppid
	}
	return false
}

// Issue 38: an owners' lock directory another account made (mcp-sandbox-owners-<uid> under
// the temporary directory) is warned about, as the init helper's directory is: doctor prints
// why (and --json has owner_locks_problem), and a server logs it at its first sweep.
func TestDoctorWarnsOfAForeignOwnersDirectory(t *testing.T) {
	gate.Require(t, "root", os.Geteuid() == 0, "a directory of another account's is made as root")
	tmp := t.TempDir()
	os.Chmod(tmp, 0o755)
	locks := filepath.Join(tmp, "mcp-sandbox-owners-"+strconv.Itoa(os.Geteuid()))
	if err := os.Mkdir(locks, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(locks, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	cfg := testkit.WriteConfig(t, "data_dir: \"-\"\nprofiles: {default: {backend: process, isolation: process, allow_same_uid: true}}\n"+
		"tenants: {local: {agents: {default: {code_execution: {}}}}}\n")
	cmd := exec.Command(testkit.Binary(t), "doctor", "--config", cfg)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "owner locks: WARNING: the owners' lock directory cannot be used") ||
		!strings.Contains(string(out), locks+" belongs to another user") {
		t.Errorf("doctor under a foreign owners' directory:\n%s", out)
	}
	cmd = exec.Command(testkit.Binary(t), "run", "--config", cfg, "-")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "XDG_STATE_HOME="+t.TempDir())
	cmd.Stdin = strings.NewReader("1")
	out, _ = cmd.CombinedOutput() // the program itself may not run: the workspace is under tmp
	if !strings.Contains(string(out), "owner locks: the owners' lock directory cannot be used") {
		t.Errorf("run under a foreign owners' directory logged:\n%s", out)
	}
}
