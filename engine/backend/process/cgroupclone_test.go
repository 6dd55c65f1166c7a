//go:build linux

package process_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mcp-sandbox/mcp-sandbox/internal/gate"
	"github.com/mcp-sandbox/mcp-sandbox/internal/launch"
	"github.com/mcp-sandbox/mcp-sandbox/internal/python"
	"github.com/mcp-sandbox/mcp-sandbox/internal/spawn"
	"golang.org/x/sys/unix"
)

// TestStartsInsideCgroupV2: with launch.Spec.CgroupClone the program's first process is
// born in its cgroup v2 group (CLONE_INTO_CGROUP), with no join step: started so by the host
// when the helper is that process, and by a Reaper for its pid 2 (the namespaces backend's
// shape), which stays outside. A cgroup2 hierarchy is mounted for it in the tests' own mount
// namespace (a v1 host has one without controllers, which is enough to start a process in).
func TestStartsInsideCgroupV2(t *testing.T) {
	gate.Require(t, "root", os.Geteuid() == 0, "mounting a cgroup2 hierarchy needs root")
	gate.Require(t, "pidns", gate.InOwnPIDNamespace(), "the mount is made only in the tests' own mount namespace (gate.Main)")
	py, err := python.Find("", 0, 0, nil)
	gate.Require(t, "python", err == nil, "no python3 here")
	mnt := t.TempDir()
	if err := unix.Mount("cgroup2", mnt, "cgroup2", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		gate.Require(t, "cgroup2", false, "cannot mount a cgroup2 hierarchy: "+err.Error())
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The program prints its own cgroup v2 membership and its parent's (for a Reaper's pid 2,
	// the Reaper, which must stay outside the group), both read through this /proc, whose pid
	// numbers are the tests' namespace's.
	const program = `s = open("/proc/self/stat").read()
ppid = s[s.rindex(")") + 2:].split()[1]
def v2(pid):
    for line in open("/proc/%s/cgroup" % pid):
        if line.startswith("0::"):
            return line.strip()
print(v2("self"), v2(ppid))`
	for _, tc := range []struct {
		name   string
		reaper bool
	}{{"host", false}, {"reaper", true}} {
		t.Run(tc.name, func(t *testing.T) {
			group := filepath.Join(mnt, "clone-"+tc.name)
			if err := os.Mkdir(group, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.Remove(group) })
			ls := &launch.Spec{
				Python: py, Argv: []string{py, "-I", "-S", "-c", program}, Env: []string{"PATH=/usr/bin:/bin"},
				CgroupProcs: []string{filepath.Join(group, "cgroup.procs")}, CgroupClone: true, Reaper: tc.reaper,
			}
			p := &spawn.Proc{Status: tc.reaper}
			var attr *syscall.SysProcAttr
			if tc.reaper {
				attr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS}
			}
			var stdout, stderr bytes.Buffer
			if err := p.Start(exe, ls, attr, &stdout, &stderr); err != nil {
				t.Fatal(err)
			}
			e := p.Wait()
			p.Close()
			if e.Code != 0 {
				t.Fatalf("exit %+v: %s", e, stderr.String())
			}
			got := strings.Fields(stdout.String())
			want := "0::/" + filepath.Base(group)
			if len(got) == 0 || got[0] != want {
				t.Fatalf("the program's cgroup: %q, want %s first (stderr %s)", stdout.String(), want, stderr.String())
			}
			if len(got) != 2 || got[1] == want {
				t.Errorf("the process that started the program is not outside the group: %q", stdout.String())
			}
		})
	}
}
